import {
  type DecodedRr,
  type Fqdn,
  isInZone,
  parentOf,
  parseZoneFile,
  QTYPE,
  RCODE,
  RecordTextError,
  readName,
  toFqdn,
} from '@cluster-dns/wire';

const DNAME = 39;
const DS = 43;
const MAX_CHAIN = 8;

/** What a zone says of a question: the sections of the answer, or that the name is not its to answer. */
export interface ZoneAnswer {
  readonly rcode: number;
  readonly authoritative: boolean;
  readonly answer: readonly DecodedRr[];
  readonly authority: readonly DecodedRr[];
  readonly additional: readonly DecodedRr[];
  /** A CNAME chain that left the zone: its last target, for the chain to resolve. */
  readonly outside?: Fqdn;
  /** The name does not exist here (NXDOMAIN or NODATA for it): `fallthrough` may pass it on. */
  readonly missing: boolean;
}

const lower = (name: string) => toFqdn(name.toLowerCase());

/** A DNAME's or name-typed record's target. */
function targetOf(rr: DecodedRr): Fqdn | undefined {
  if (rr.target !== undefined) return lower(rr.target);
  if (rr.type === DNAME && 'rdata' in rr && rr.rdata) return lower(readName(rr.rdata, 0).name);
  return undefined;
}

/**
 * One zone read from an RFC 1035 file, answered as CoreDNS's file plugin does (plugin/file
 * lookup.go): authoritative answers with the apex NS in authority and in-zone addresses of MX,
 * SRV and NS targets in additional; CNAME chains followed inside the zone; DNAME synthesis;
 * wildcards from the closest encloser (RFC 4592), an empty non-terminal stopping them; referrals
 * with glue below a delegation; NXDOMAIN and NODATA with the SOA.
 */
export class FileZone {
  private readonly byName = new Map<Fqdn, DecodedRr[]>();
  /** Names that exist only as ancestors of names (empty non-terminals). */
  private readonly nonTerminals = new Set<Fqdn>();
  readonly soa: DecodedRr;
  readonly serial: number;

  constructor(
    readonly origin: Fqdn,
    readonly zones: readonly Fqdn[],
    records: readonly DecodedRr[],
    readonly fallthrough: readonly Fqdn[] | undefined,
  ) {
    for (const rr of records) {
      const name = lower(rr.name);
      if (!isInZone(name, origin)) continue;
      const list = this.byName.get(name) ?? [];
      list.push({ ...rr, name });
      this.byName.set(name, list);
    }
    for (const name of this.byName.keys())
      for (let up = parentOf(name); up !== origin && isInZone(up, origin); up = parentOf(up))
        if (!this.byName.has(up)) this.nonTerminals.add(up);
    // The apex's SOA, or (as CoreDNS's Parse takes it) the file's first.
    const soa = this.byName.get(origin)?.find((r) => r.type === QTYPE.SOA) ?? records.find((r) => r.type === QTYPE.SOA);
    if (!soa) throw new RecordTextError(`zone ${origin} has no SOA record`);
    this.soa = soa;
    this.serial = soa.soa?.serial ?? 0;
  }

  /** Reads a zone file for `origin`; throws RecordTextError naming the line. */
  static fromText(
    text: string,
    origin: Fqdn,
    options: {
      zones?: readonly Fqdn[];
      fallthrough?: readonly Fqdn[] | undefined;
      include?: (path: string) => string;
    } = {},
  ): FileZone {
    const records = parseZoneFile(text, { origin, ...(options.include ? { include: options.include } : {}) });
    return new FileZone(origin, options.zones ?? [origin], records, options.fallthrough);
  }

  /** Whether the name has records here (not an empty non-terminal, not only a wildcard's). */
  hasName(name: Fqdn): boolean {
    return this.byName.has(lower(name));
  }

  private exists(name: Fqdn): boolean {
    return this.byName.has(name) || this.nonTerminals.has(name);
  }

  private typed(name: Fqdn, qtype: number): DecodedRr[] {
    return (this.byName.get(name) ?? []).filter((r) => qtype === QTYPE.ANY || r.type === qtype);
  }

  private apexNs(): DecodedRr[] {
    return this.typed(this.origin, QTYPE.NS);
  }

  /** In-zone A and AAAA of the targets of MX, SRV and NS records, each once. */
  private additionalFor(records: readonly DecodedRr[]): DecodedRr[] {
    const seen = new Set<Fqdn>();
    const out: DecodedRr[] = [];
    for (const r of records) {
      if (r.type !== QTYPE.MX && r.type !== QTYPE.SRV && r.type !== QTYPE.NS) continue;
      const target = targetOf(r);
      if (!target || seen.has(target) || !isInZone(target, this.origin)) continue;
      seen.add(target);
      out.push(...this.typed(target, QTYPE.A), ...this.typed(target, QTYPE.AAAA));
    }
    return out;
  }

  /** NXDOMAIN or NODATA with the SOA; `missing`: the name has no records here (fallthrough may take it). */
  private negative(rcode: number, missing = true): ZoneAnswer {
    return { rcode, authoritative: true, answer: [], authority: [this.soa], additional: [], missing };
  }

  /** The answer to `qname` (in this zone) and `qtype`. */
  lookup(qname: Fqdn, qtype: number): ZoneAnswer {
    return this.lookupChain(lower(qname), qtype, [], 0);
  }

  private lookupChain(qname: Fqdn, qtype: number, chain: DecodedRr[], depth: number): ZoneAnswer {
    // Below a delegation: a referral, whatever was asked.
    const labels = qname.split('.').length;
    const originLabels = this.origin === '.' ? 1 : this.origin.split('.').length;
    for (let cut = labels - originLabels; cut >= 0; cut--) {
      const at = (cut === 0 ? qname : qname.split('.').slice(cut).join('.')) as Fqdn;
      if (at === this.origin || !isInZone(at, this.origin)) continue;
      const ns = this.typed(at, QTYPE.NS);
      if (ns.length && !(qtype === DS && at === qname))
        return {
          rcode: RCODE.NOERROR,
          authoritative: false,
          answer: chain,
          authority: ns,
          additional: this.additionalFor(ns),
          missing: false,
        };
      const dname = this.typed(at, DNAME)[0];
      if (dname && at !== qname) {
        const target = targetOf(dname) as Fqdn;
        const synthesized = toFqdn(`${qname.slice(0, qname.length - at.length)}${target}`);
        const cname: DecodedRr = {
          name: qname,
          type: QTYPE.CNAME,
          class: dname.class,
          ttl: dname.ttl,
          target: synthesized,
        };
        return this.follow([...chain, dname, cname], synthesized, qtype, depth);
      }
    }
    const records = this.byName.get(qname);
    if (!records) {
      if (this.nonTerminals.has(qname)) return chain.length ? this.positive(chain, []) : this.negative(RCODE.NOERROR);
      return this.wildcard(qname, qtype, chain, depth);
    }
    return this.fromRecords(qname, records, qtype, chain, depth);
  }

  private fromRecords(
    owner: Fqdn,
    records: readonly DecodedRr[],
    qtype: number,
    chain: DecodedRr[],
    depth: number,
  ): ZoneAnswer {
    const matching = records.filter((r) => qtype === QTYPE.ANY || r.type === qtype);
    if (matching.length) return this.positive([...chain, ...matching.map((r) => ({ ...r, name: owner }))], matching);
    const cname = records.find((r) => r.type === QTYPE.CNAME);
    if (cname) return this.follow([...chain, { ...cname, name: owner }], targetOf(cname) as Fqdn, qtype, depth);
    return chain.length ? this.positive(chain, []) : this.negative(RCODE.NOERROR, false);
  }

  private follow(chain: DecodedRr[], target: Fqdn, qtype: number, depth: number): ZoneAnswer {
    if (qtype === QTYPE.CNAME || depth >= MAX_CHAIN) return this.positive(chain, []);
    if (!isInZone(target, this.origin)) return { ...this.positive(chain, []), outside: target };
    if (chain.some((r) => lower(r.name) === target)) return this.positive(chain, []);
    return this.lookupChain(target, qtype, chain, depth + 1);
  }

  /** RFC 4592: the closest encloser's `*` answers for a name that does not exist. */
  private wildcard(qname: Fqdn, qtype: number, chain: DecodedRr[], depth: number): ZoneAnswer {
    let encloser = parentOf(qname);
    while (encloser !== this.origin && !this.exists(encloser) && isInZone(encloser, this.origin))
      encloser = parentOf(encloser);
    const source = toFqdn(`*.${encloser}`);
    const records = this.byName.get(source);
    if (records) return this.fromRecords(qname, records, qtype, chain, depth);
    if (this.nonTerminals.has(source)) return chain.length ? this.positive(chain, []) : this.negative(RCODE.NOERROR);
    return chain.length ? { ...this.negative(RCODE.NXDOMAIN), answer: chain } : this.negative(RCODE.NXDOMAIN);
  }

  private positive(answer: DecodedRr[], last: readonly DecodedRr[]): ZoneAnswer {
    return {
      rcode: RCODE.NOERROR,
      authoritative: true,
      answer,
      authority: this.apexNs(),
      additional: this.additionalFor(last),
      missing: false,
    };
  }

  /** Every record, for a transfer or a test. */
  records(): DecodedRr[] {
    return [...this.byName.values()].flat();
  }
}
