import { Buffer } from 'node:buffer';
import dgram from 'node:dgram';
import {
  assembleReply,
  buildBareResponse,
  buildQueryMessage,
  copyRecord,
  createQueryPipeline,
  type DnsListener,
  type DnsRequest,
  encodeMessage,
  FLAG,
  HEADER_BYTES,
  listenDns,
  type ParsedQuery,
  QTYPE,
  RCODE,
  type Reply,
  type Rr,
  type ScannedRecord,
  scanResponse,
  toFqdn,
} from '@cluster-dns/wire';

export type UpstreamBehaviour = 'answer' | 'servfail' | 'refused' | 'drop';
/**
 * Forged replies sent before the real one: a wrong ID, another question, from another port, with
 * QR clear, without a question, or `spray`: 65,536 forged replies from another port, one per ID.
 */
export type SpoofKind = 'id' | 'question' | 'source' | 'not-a-response' | 'no-question' | 'spray';

/**
 * A scripted answer: the messages to send back for a query (several, in order; none drops it), or
 * undefined to answer from `records` as usual. `good` is that usual answer, to alter.
 */
export type UpstreamScript = (
  q: ParsedQuery,
  transport: 'udp' | 'tcp',
  good: () => Buffer,
) => Buffer | Buffer[] | undefined | Promise<Buffer | Buffer[] | undefined>;

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/** A record the test upstream serves at a name: any record type, the TTL defaulting to 60. */
export type TestUpstreamRecord = DistributiveOmit<Rr, 'name' | 'class' | 'ttl'> & { ttl?: number };

export interface TestUpstreamOptions {
  /** Where to listen (default 127.0.0.1, a free port). */
  host?: string;
  port?: number;
  /** Records by owner name. Names not here get NXDOMAIN with an SOA of `negativeTtl`. */
  records?: Record<string, TestUpstreamRecord[]>;
  negativeTtl?: number;
  behaviour?: UpstreamBehaviour;
  delayMs?: number;
  /**
   * Hold every query unanswered until `release()`: a slow upstream whose slowness the test
   * controls, so "answered before the upstream" is an order of events, not a time measured.
   */
  hold?: boolean;
  /** Over UDP, answer with TC set and no records, so the client must ask over TCP. */
  truncateUdp?: boolean;
  /** Before the real reply, send a forged one of this kind. */
  spoof?: SpoofKind;
  /** Answers any way a test wants (faults, poisoning attempts); runs after `delayMs`. */
  script?: UpstreamScript;
  /** Over TCP, never answer (a firewall that lets UDP through and drops TCP). */
  refuseTcp?: boolean;
}

export interface SeenQuery {
  name: string;
  type: number;
  transport: 'udp' | 'tcp';
  id: number;
  /** The source port it came from: what an attacker controlling a name learns of its asker. */
  port: number;
  /** The query as it came: what it carried beside the question (EDNS options). */
  raw: Buffer;
}

export interface TestUpstream {
  readonly host: string;
  readonly port: number;
  /** `127.0.0.1#port`, as dnsmasq's --server takes it. */
  readonly address: string;
  readonly queries: SeenQuery[];
  /** Queries waiting in `hold`. */
  held(): number;
  /** Answers every held query (as the options then say) and stops holding. */
  release(): void;
  set(options: Partial<TestUpstreamOptions>): void;
  close(): Promise<void>;
}

/** An authoritative reply to `q` with these records, as any server would send it (for scripts). */
export function replyTo(
  q: ParsedQuery,
  sections: { answers?: Rr[]; authorities?: Rr[]; additionals?: Rr[]; rcode?: number },
): Buffer {
  return encodeMessage({
    id: q.id,
    flags: {
      qr: true,
      opcode: 0,
      aa: true,
      tc: false,
      rd: q.rd,
      ra: true,
      ad: false,
      cd: false,
      rcode: sections.rcode ?? RCODE.NOERROR,
    },
    questions: [{ name: q.qname, type: q.qtype, class: q.qclass }],
    answers: sections.answers ?? [],
    authorities: sections.authorities ?? [],
    additionals: sections.additionals ?? [],
  });
}

/** A small authoritative DNS server for tests, with faults on demand. */
export async function startTestUpstream(initial: TestUpstreamOptions = {}): Promise<TestUpstream> {
  let options: TestUpstreamOptions = { ...initial };
  const queries: SeenQuery[] = [];
  const host = initial.host ?? '127.0.0.1';
  let held = 0;
  let release: () => void = () => {};
  let released = Promise.resolve();
  const hold = () => {
    released = new Promise<void>((resolve) => {
      release = resolve;
    });
  };
  if (initial.hold) hold();
  const forger = dgram.createSocket('udp4');
  await new Promise<void>((resolve) => forger.bind(0, host, () => resolve()));

  /** The SOA of our negative answers, as octets that stand in any reply (names spelt out). */
  const soaRecord = (ttl: number): Buffer => {
    const soa: Rr = {
      // Owned by the root, an ancestor of every name asked, as a real server's zone apex is.
      name: '.',
      type: QTYPE.SOA,
      class: 1,
      ttl,
      soa: {
        primary: 'ns.example.',
        admin: 'hostmaster.example.',
        serial: 1,
        refresh: 1,
        retry: 1,
        expiration: 1,
        minimum: ttl,
      },
    };
    const message = encodeMessage({ ...buildQueryMessage(0, '.', QTYPE.SOA), questions: [], answers: [soa] });
    return copyRecord(message, scanResponse(message).records[0] as ScannedRecord);
  };

  /** NXDOMAIN or NODATA with our SOA, built on the question's own octets: any name works. */
  const negative = (q: ParsedQuery, rcode: number): Buffer =>
    assembleReply(
      { id: q.id, flags: FLAG.AA | FLAG.RA | (q.rd ? FLAG.RD : 0) | rcode },
      q.raw.subarray(HEADER_BYTES, q.questionEnd),
      [[], [soaRecord(options.negativeTtl ?? 60)], []],
    );

  /** Every name with records below it, as a real server answers it: NODATA, not NXDOMAIN (RFC 8020). */
  let ancestorsOf: { records: TestUpstreamOptions['records']; names: Set<string> } | undefined;
  const emptyNonTerminal = (name: string): boolean => {
    if (ancestorsOf?.records !== options.records) {
      const names = new Set<string>();
      for (const owner of Object.keys(options.records ?? {})) {
        const labels = toFqdn(owner.toLowerCase()).slice(0, -1).split('.');
        for (let i = 1; i < labels.length; i++) names.add(`${labels.slice(i).join('.')}.`);
      }
      ancestorsOf = { records: options.records, names };
    }
    return ancestorsOf?.names.has(name.toLowerCase()) === true;
  };

  const reply = (q: ParsedQuery): Buffer => {
    const name = toFqdn(q.qname);
    const records = options.records?.[name] ?? options.records?.[name.slice(0, -1)];
    if (!records) return negative(q, emptyNonTerminal(name) ? RCODE.NOERROR : RCODE.NXDOMAIN);
    // ANY: every record at the name, as an authoritative server without RFC 8482 sends it.
    const matching = records.filter((r) => q.qtype === QTYPE.ANY || r.type === q.qtype || r.type === QTYPE.CNAME);
    if (matching.length === 0) return negative(q, RCODE.NOERROR);
    return replyTo(q, {
      answers: matching.map((r) => ({ ...r, name: q.qname, class: 1, ttl: r.ttl ?? 60 }) as Rr),
    });
  };

  const handle = async ({ query: q, context }: DnsRequest): Promise<Reply> => {
    queries.push({
      name: q.qname.toLowerCase(),
      type: q.qtype,
      transport: context.transport,
      id: q.id,
      port: context.remotePort,
      raw: Buffer.from(q.raw),
    });
    if (options.delayMs) await new Promise((r) => setTimeout(r, options.delayMs));
    if (options.hold) {
      held++;
      await released;
      held--;
    }
    switch (options.behaviour ?? 'answer') {
      case 'drop':
        return undefined;
      case 'servfail':
        return buildBareResponse(q, RCODE.SERVFAIL);
      case 'refused':
        return buildBareResponse(q, RCODE.REFUSED);
      default:
        break;
    }
    if (options.truncateUdp && context.transport === 'udp')
      return buildBareResponse(q, RCODE.NOERROR, { truncated: true, authoritative: true });
    if (options.refuseTcp && context.transport === 'tcp') return undefined;
    if (options.script) {
      const scripted = await options.script(q, context.transport, () => reply(q));
      if (scripted !== undefined)
        return Array.isArray(scripted) ? (scripted.length > 0 ? scripted : undefined) : scripted;
    }
    const good = reply(q);
    if (options.spoof === 'spray' && context.transport === 'udp') {
      // Every ID, from a port the query did not go to, paced so the burst is not all lost in buffers.
      const forged = buildBareResponse(q, RCODE.NXDOMAIN);
      for (let id = 0; id <= 0xffff; id++) {
        const copy = Buffer.from(forged);
        copy.writeUInt16BE(id, 0);
        forger.send(copy, context.remotePort, context.remoteAddress);
        if ((id & 0x7f) === 0x7f) await new Promise((r) => setTimeout(r, 1));
      }
      await new Promise((r) => setTimeout(r, 20));
      return good;
    }
    if (options.spoof && context.transport === 'udp') {
      // The forgery says NXDOMAIN: a client that takes it shows the wrong answer.
      const forged = buildBareResponse(q, RCODE.NXDOMAIN);
      if (options.spoof === 'id') forged.writeUInt16BE((q.id + 1) & 0xffff, 0);
      if (options.spoof === 'question') forged[13] = (forged[13] as number) ^ 0x01;
      if (options.spoof === 'not-a-response') forged.writeUInt16BE(forged.readUInt16BE(2) & ~FLAG.QR, 2);
      if (options.spoof === 'no-question') {
        const header = forged.subarray(0, HEADER_BYTES);
        header.writeUInt16BE(0, 4);
        return [Buffer.from(header), good];
      }
      if (options.spoof === 'source') {
        await new Promise<void>((resolve) =>
          forger.send(forged, context.remotePort, context.remoteAddress, () => resolve()),
        );
        await new Promise((r) => setTimeout(r, 10));
        return good;
      }
      return [forged, good];
    }
    return good;
  };

  const listener: DnsListener = await listenDns({
    host,
    port: initial.port ?? 0,
    // The same preamble as our own servers: malformed queries get FORMERR, responses are dropped.
    handler: createQueryPipeline({ handle, recursionAvailable: true, classes: [1, 3, 255] }),
  });
  return {
    host,
    port: listener.port,
    address: `${host}#${listener.port}`,
    queries,
    held: () => held,
    release: () => {
      options = { ...options, hold: false };
      release();
    },
    set: (next) => {
      if (next.hold && !options.hold) hold();
      options = { ...options, ...next };
      if (next.hold === false) release();
    },
    close: async () => {
      forger.close();
      await listener.close();
    },
  };
}
