import { Buffer } from 'node:buffer';
import { isIP } from 'node:net';
import { QCLASS, QTYPE } from './constants.js';
import { ClusterDnsError } from './errors.js';
import { toFqdn } from './fqdn.js';
import { canonicalIpv6 } from './ip-address.js';
import { writeName } from './names-on-wire.js';
import type { DecodedRr, OpaqueRecord } from './records.js';

/**
 * Records in presentation form (RFC 1035 §5.1), as zone files, CoreDNS's `template` answers and
 * its test tables write them: `name [ttl] [class] type rdata`. Read into the records this project
 * encodes (opaque RFC 3597 data for the types it does not model), and written back for logs and
 * tests. What a zone file adds ($ORIGIN, $TTL, parentheses, `@`, blank owners) is zone-file.ts's.
 */

/** Mnemonics beyond QTYPE's, for reading and writing presentation text (not metric labels). */
const MORE_TYPES: Readonly<Record<string, number>> = {
  MD: 3,
  MF: 4,
  MB: 7,
  MG: 8,
  MR: 9,
  NULL: 10,
  WKS: 11,
  MINFO: 14,
  RP: 17,
  AFSDB: 18,
  LOC: 29,
  NAPTR: 35,
  DNAME: 39,
  DS: 43,
  SSHFP: 44,
  NSEC: 47,
  DNSKEY: 48,
  TLSA: 52,
  SVCB: 64,
  HTTPS: 65,
  SPF: 99,
  CAA: 257,
  NSEC3: 50,
  NSEC3PARAM: 51,
  CDS: 59,
  CDNSKEY: 60,
};

/** DNSSEC's records: a zone file may hold them; this project signs nothing and serves them not. */
const DNSSEC_TYPES = new Set([43, 46, 47, 48, 50, 51, 59, 60]);

/** Whether a type is one of DNSSEC's (a zone file's signatures and chains, skipped when read). */
export function isDnssecType(type: number): boolean {
  return DNSSEC_TYPES.has(type);
}
const TYPE_NUMBERS = new Map<string, number>([...Object.entries(QTYPE), ...Object.entries(MORE_TYPES)]);
const TYPE_TEXT = new Map<number, string>([...TYPE_NUMBERS].map(([k, v]) => [v, k]));
const CLASS_NUMBERS = new Map<string, number>([
  ['IN', QCLASS.IN],
  ['CH', QCLASS.CH],
  ['CHAOS', QCLASS.CH],
  ['HS', 4],
  ['NONE', QCLASS.NONE],
  ['ANY', QCLASS.ANY],
]);

/** A type's mnemonic, or TYPEn (RFC 3597). */
export function typeText(type: number): string {
  return TYPE_TEXT.get(type) ?? `TYPE${type}`;
}

/** A type from its mnemonic or TYPEn; undefined if neither. */
export function typeFromText(text: string): number | undefined {
  const upper = text.toUpperCase();
  const known = TYPE_NUMBERS.get(upper);
  if (known !== undefined) return known;
  const m = /^TYPE(\d{1,5})$/.exec(upper);
  return m && Number(m[1]) < 65_536 ? Number(m[1]) : undefined;
}

export function classText(qclass: number): string {
  return qclass === QCLASS.IN ? 'IN' : qclass === QCLASS.CH ? 'CH' : qclass === 4 ? 'HS' : `CLASS${qclass}`;
}

export function classFromText(text: string): number | undefined {
  const upper = text.toUpperCase();
  const known = CLASS_NUMBERS.get(upper);
  if (known !== undefined) return known;
  const m = /^CLASS(\d{1,5})$/.exec(upper);
  return m && Number(m[1]) < 65_536 ? Number(m[1]) : undefined;
}

/** A record that does not read: says what, and where in the text. */
export class RecordTextError extends ClusterDnsError {
  constructor(message: string) {
    super('RECORD_TEXT_INVALID', message);
  }
}

/** `1h30m`, `3600`, `2d` (BIND's units, as zone files write TTLs); undefined if not a TTL. */
export function ttlFromText(text: string): number | undefined {
  if (/^\d+$/.test(text)) {
    const n = Number(text);
    return n <= 0xffffffff ? n : undefined;
  }
  const m = /^(?:\d+[smhdw])+$/i.exec(text);
  if (!m) return undefined;
  const units: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400, w: 604_800 };
  let total = 0;
  for (const [, n, u] of text.matchAll(/(\d+)([smhdw])/gi))
    total += Number(n) * (units[(u as string).toLowerCase()] ?? 0);
  return total <= 0xffffffff ? total : undefined;
}

/** The words of one record's text: blanks split, `"…"` one word (kept quoted, for TXT), `;` a comment. */
export function recordWords(text: string): string[] {
  const words: string[] = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i] as string;
    if (c === ';') break;
    if (/\s/.test(c) || c === '(' || c === ')') {
      i++;
      continue;
    }
    let word = '';
    if (c === '"') {
      word = '"';
      i++;
      while (i < text.length && text[i] !== '"') {
        if (text[i] === '\\' && i + 1 < text.length) word += text[i++];
        word += text[i++];
      }
      if (i >= text.length) throw new RecordTextError(`a quoted string is not closed: ${text}`);
      word += '"';
      i++;
    } else {
      while (i < text.length && !/[\s;()]/.test(text[i] as string)) {
        if (text[i] === '\\' && i + 1 < text.length) word += text[i++];
        word += text[i++];
      }
    }
    words.push(word);
  }
  return words;
}

/** A name relative to `origin` made absolute (`@` is the origin itself). */
export function absoluteName(name: string, origin: string): string {
  if (name === '@') return toFqdn(origin);
  if (name.endsWith('.') && !name.endsWith('\\.')) return toFqdn(name);
  return toFqdn(origin === '.' ? name : `${name}.${origin}`);
}

/** A `<character-string>` (RFC 1035 §3.3): its octets, escapes `\X` and `\DDD` read. */
function characterString(word: string): Buffer {
  const body = word.startsWith('"') && word.endsWith('"') && word.length >= 2 ? word.slice(1, -1) : word;
  const out: number[] = [];
  for (let i = 0; i < body.length; i++) {
    const c = body.charCodeAt(i);
    if (c === 0x5c && i + 1 < body.length) {
      const d = /^\d{3}/.exec(body.slice(i + 1));
      if (d) {
        out.push(Number(d[0]) & 0xff);
        i += 3;
      } else out.push(body.charCodeAt(++i) & 0xff);
    } else if (c < 0x80) out.push(c);
    else out.push(...Buffer.from(body[i] as string, 'utf8'));
  }
  if (out.length > 255) throw new RecordTextError(`a character-string is longer than 255 octets: ${word}`);
  return Buffer.from(out);
}

const nameOctets = (name: string) => writeName(name);
const u16 = (n: number) => {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(n & 0xffff);
  return b;
};
const intOf = (word: string | undefined, what: string, max: number) => {
  if (word === undefined || !/^\d+$/.test(word) || Number(word) > max)
    throw new RecordTextError(`${what} must be a number from 0 to ${max}, got ${JSON.stringify(word ?? '')}`);
  return Number(word);
};

export interface RecordTextOptions {
  /** Where relative names end ($ORIGIN); the root by default, as CoreDNS's dns.NewRR. */
  origin?: string;
  /** The TTL when none is written ($TTL); 3600 by default, as dns.NewRR. */
  defaultTtl?: number;
  /** The owner when the text leaves it blank (a zone file's previous owner). */
  previousOwner?: string;
}

/** Reads one record in presentation form; throws RecordTextError naming what does not read. */
export function parseRecordText(text: string, options: RecordTextOptions = {}): DecodedRr {
  return recordOfWords(recordWords(text), options, /^\s/.test(text));
}

/** One record from its words (zone-file.ts joins a record's lines first); `blankOwner`: the line began with a blank. */
export function recordOfWords(words: readonly string[], options: RecordTextOptions, blankOwner = false): DecodedRr {
  const origin = options.origin ?? '.';
  const rest = [...words];
  let owner: string;
  if (blankOwner) {
    if (options.previousOwner === undefined) throw new RecordTextError('a record without an owner, and none before it');
    owner = options.previousOwner;
  } else {
    const first = rest.shift();
    if (first === undefined) throw new RecordTextError('an empty record');
    owner = absoluteName(first, origin);
  }
  let ttl: number | undefined;
  let qclass: number | undefined;
  // TTL and class may come in either order (RFC 1035 §5.1).
  for (let i = 0; i < 2; i++) {
    const word = rest[0];
    if (word === undefined) break;
    const asTtl = ttl === undefined ? ttlFromText(word) : undefined;
    const asClass = qclass === undefined && typeFromText(word) === undefined ? classFromText(word) : undefined;
    if (asTtl !== undefined) ttl = asTtl;
    else if (asClass !== undefined) qclass = asClass;
    else break;
    rest.shift();
  }
  const typeWord = rest.shift();
  const type = typeWord === undefined ? undefined : typeFromText(typeWord);
  if (typeWord === undefined) throw new RecordTextError(`no record type in ${JSON.stringify(words.join(' '))}`);
  if (type === undefined)
    throw new RecordTextError(
      `unknown record type ${typeWord} in ${JSON.stringify(words.join(' '))} (write TYPEn with RFC 3597 data: \\# LENGTH HEX)`,
    );
  const head = { name: owner, type, class: qclass ?? QCLASS.IN, ttl: ttl ?? options.defaultTtl ?? 3600 };
  return recordOfData(head, rest, origin);
}

function recordOfData(
  head: { name: string; type: number; class: number; ttl: number },
  data: string[],
  origin: string,
): DecodedRr {
  const { type } = head;
  const name = (i: number) => {
    const w = data[i];
    if (w === undefined) throw new RecordTextError(`${typeText(type)} needs a name`);
    return absoluteName(w, origin);
  };
  const opaque = (rdata: Buffer): OpaqueRecord => ({ ...head, rdata });
  if (data[0] === '\\#') {
    const length = intOf(data[1], 'the RFC 3597 length', 65_535);
    const hex = data.slice(2).join('');
    if (!/^[0-9a-f]*$/i.test(hex) || hex.length !== length * 2)
      throw new RecordTextError(`RFC 3597 data must be ${length} octets in hex`);
    return opaque(Buffer.from(hex, 'hex'));
  }
  switch (type) {
    case QTYPE.A: {
      const address = data[0] ?? '';
      if (isIP(address) !== 4 || data.length !== 1) throw new RecordTextError(`not an IPv4 address: ${data.join(' ')}`);
      return { ...head, type: QTYPE.A, address };
    }
    case QTYPE.AAAA: {
      const address = data[0] ?? '';
      if (isIP(address) !== 6 || data.length !== 1) throw new RecordTextError(`not an IPv6 address: ${data.join(' ')}`);
      return { ...head, type: QTYPE.AAAA, address: canonicalIpv6(address) };
    }
    case QTYPE.NS:
    case QTYPE.CNAME:
    case QTYPE.PTR:
      return { ...head, type, target: name(0) };
    case QTYPE.MX:
      return { ...head, type: QTYPE.MX, priority: intOf(data[0], 'MX preference', 65_535), target: name(1) };
    case QTYPE.SRV:
      return {
        ...head,
        type: QTYPE.SRV,
        priority: intOf(data[0], 'SRV priority', 65_535),
        weight: intOf(data[1], 'SRV weight', 65_535),
        port: intOf(data[2], 'SRV port', 65_535),
        target: name(3),
      };
    case QTYPE.TXT:
    case MORE_TYPES.SPF: {
      if (data.length === 0) throw new RecordTextError('TXT needs at least one string');
      const strings = data.map(characterString);
      if (type === QTYPE.TXT) return { ...head, type: QTYPE.TXT, text: strings.map((s) => s.toString('latin1')) };
      return opaque(Buffer.concat(strings.flatMap((s) => [Buffer.from([s.length]), s])));
    }
    case QTYPE.SOA:
      return {
        ...head,
        type: QTYPE.SOA,
        soa: {
          primary: name(0),
          admin: name(1),
          serial: intOf(data[2], 'SOA serial', 0xffffffff),
          refresh: ttlFromText(data[3] ?? '') ?? intOf(data[3], 'SOA refresh', 0xffffffff),
          retry: ttlFromText(data[4] ?? '') ?? intOf(data[4], 'SOA retry', 0xffffffff),
          expiration: ttlFromText(data[5] ?? '') ?? intOf(data[5], 'SOA expire', 0xffffffff),
          minimum: ttlFromText(data[6] ?? '') ?? intOf(data[6], 'SOA minimum', 0xffffffff),
        },
      };
    case QTYPE.HINFO:
      if (data.length !== 2) throw new RecordTextError('HINFO needs CPU and OS');
      return opaque(Buffer.concat(data.flatMap((w) => [Buffer.from([characterString(w).length]), characterString(w)])));
    case MORE_TYPES.DNAME:
      return opaque(nameOctets(name(0)));
    case MORE_TYPES.CAA: {
      const tag = data[1] ?? '';
      if (!/^[a-z0-9]+$/i.test(tag)) throw new RecordTextError('CAA needs FLAGS TAG VALUE');
      const value = characterString(data.slice(2).join(' ') || '""');
      return opaque(
        Buffer.concat([Buffer.from([intOf(data[0], 'CAA flags', 255), tag.length]), Buffer.from(tag, 'latin1'), value]),
      );
    }
    case MORE_TYPES.NAPTR: {
      const [order, pref, flags, services, regexp] = data;
      return opaque(
        Buffer.concat([
          u16(intOf(order, 'NAPTR order', 65_535)),
          u16(intOf(pref, 'NAPTR preference', 65_535)),
          ...[flags, services, regexp].flatMap((w) => {
            const s = characterString(w ?? '""');
            return [Buffer.from([s.length]), s];
          }),
          nameOctets(name(5)),
        ]),
      );
    }
    default:
      throw new RecordTextError(
        `${typeText(type)} records are not read in presentation form here; write them as RFC 3597 data (\\# LENGTH HEX)`,
      );
  }
}

/** A <character-string> in presentation form, quoted, with `"` and `\` escaped and non-printables as \DDD. */
function quoted(octets: string): string {
  let out = '"';
  for (let i = 0; i < octets.length; i++) {
    const c = octets.charCodeAt(i);
    if (c === 0x22 || c === 0x5c) out += `\\${octets[i]}`;
    else if (c < 0x20 || c > 0x7e) out += `\\${String(c).padStart(3, '0')}`;
    else out += octets[i];
  }
  return `${out}"`;
}

/** A record in presentation form, as miekg/dns writes it (tab-separated): for logs and test comparisons. */
export function recordText(rr: DecodedRr): string {
  const head = `${rr.name}\t${rr.ttl}\t${classText(rr.class)}\t${typeText(rr.type)}`;
  let data: string;
  if ('rdata' in rr && rr.rdata)
    data = `\\# ${rr.rdata.length}${rr.rdata.length ? ` ${rr.rdata.toString('hex')}` : ''}`;
  else if (rr.address !== undefined) data = rr.address;
  else if (rr.soa !== undefined) {
    const s = rr.soa;
    data = `${s.primary} ${s.admin} ${s.serial} ${s.refresh} ${s.retry} ${s.expiration} ${s.minimum}`;
  } else if (rr.text !== undefined) data = rr.text.map(quoted).join(' ');
  else if (rr.port !== undefined) data = `${rr.priority} ${rr.weight} ${rr.port} ${rr.target}`;
  else if (rr.priority !== undefined) data = `${rr.priority} ${rr.target}`;
  else data = rr.target ?? '';
  return `${head}\t${data}`;
}

/** Whether two records are the same RR (owner case aside), for sets compared in tests and zones. */
export function sameRecord(a: DecodedRr, b: DecodedRr): boolean {
  return recordText({ ...a, name: a.name.toLowerCase() }) === recordText({ ...b, name: b.name.toLowerCase() });
}
