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
export type SpoofKind = 'id' | 'question' | 'source';

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
  /** Over UDP, answer with TC set and no records, so the client must ask over TCP. */
  truncateUdp?: boolean;
  /** Before the real reply, send a forged one of this kind. */
  spoof?: SpoofKind;
}

export interface SeenQuery {
  name: string;
  type: number;
  transport: 'udp' | 'tcp';
  id: number;
}

export interface TestUpstream {
  readonly host: string;
  readonly port: number;
  /** `127.0.0.1#port`, as dnsmasq's --server takes it. */
  readonly address: string;
  readonly queries: SeenQuery[];
  set(options: Partial<TestUpstreamOptions>): void;
  close(): Promise<void>;
}

/** A small authoritative DNS server for tests, with faults on demand. */
export async function startTestUpstream(initial: TestUpstreamOptions = {}): Promise<TestUpstream> {
  let options: TestUpstreamOptions = { ...initial };
  const queries: SeenQuery[] = [];
  const host = initial.host ?? '127.0.0.1';
  const forger = dgram.createSocket('udp4');
  await new Promise<void>((resolve) => forger.bind(0, host, () => resolve()));

  /** The SOA of our negative answers, as octets that stand in any reply (names spelt out). */
  const soaRecord = (ttl: number): Buffer => {
    const soa: Rr = {
      name: 'example.',
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

  const reply = (q: ParsedQuery): Buffer => {
    const name = toFqdn(q.qname);
    const records = options.records?.[name] ?? options.records?.[name.slice(0, -1)];
    if (!records) return negative(q, RCODE.NXDOMAIN);
    const matching = records.filter((r) => r.type === q.qtype || r.type === QTYPE.CNAME);
    if (matching.length === 0) return negative(q, RCODE.NOERROR);
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
        rcode: RCODE.NOERROR,
      },
      questions: [{ name: q.qname, type: q.qtype, class: q.qclass }],
      answers: matching.map((r) => ({ ...r, name: q.qname, class: 1, ttl: r.ttl ?? 60 }) as Rr),
      authorities: [],
      additionals: [],
    });
  };

  const handle = async ({ query: q, context }: DnsRequest): Promise<Reply> => {
    queries.push({ name: q.qname.toLowerCase(), type: q.qtype, transport: context.transport, id: q.id });
    if (options.delayMs) await new Promise((r) => setTimeout(r, options.delayMs));
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
    const good = reply(q);
    if (options.spoof && context.transport === 'udp') {
      // The forgery says NXDOMAIN: a client that takes it shows the wrong answer.
      const forged = buildBareResponse(q, RCODE.NXDOMAIN);
      if (options.spoof === 'id') forged.writeUInt16BE((q.id + 1) & 0xffff, 0);
      if (options.spoof === 'question') forged[13] = (forged[13] as number) ^ 0x01;
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
    set: (next) => {
      options = { ...options, ...next };
    },
    close: async () => {
      forger.close();
      await listener.close();
    },
  };
}
