import dgram from 'node:dgram';
import {
  buildBareResponse,
  type DnsListener,
  encodeMessage,
  listenDns,
  type ParsedQuery,
  parseQuery,
  QTYPE,
  RCODE,
  type Rr,
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

  const reply = (q: ParsedQuery): Buffer => {
    const name = toFqdn(q.qname);
    const records = options.records?.[name] ?? options.records?.[name.slice(0, -1)];
    const header = { qr: true, opcode: 0, aa: true, tc: false, rd: q.rd, ra: true, ad: false, cd: false };
    const question = [{ name: q.qname, type: q.qtype, class: q.qclass }];
    const soa: Rr = {
      name: 'example.',
      type: QTYPE.SOA,
      class: 1,
      ttl: options.negativeTtl ?? 60,
      soa: {
        primary: 'ns.example.',
        admin: 'hostmaster.example.',
        serial: 1,
        refresh: 1,
        retry: 1,
        expiration: 1,
        minimum: options.negativeTtl ?? 60,
      },
    };
    if (!records) {
      return encodeMessage({
        id: q.id,
        flags: { ...header, rcode: RCODE.NXDOMAIN },
        questions: question,
        answers: [],
        authorities: [soa],
        additionals: [],
      });
    }
    const matching = records.filter((r) => r.type === q.qtype || r.type === QTYPE.CNAME);
    const answers = matching.map((r) => ({ ...r, name: q.qname, class: 1, ttl: r.ttl ?? 60 }) as Rr);
    const authorities = answers.length ? [] : [soa];
    return encodeMessage({
      id: q.id,
      flags: { ...header, rcode: RCODE.NOERROR },
      questions: question,
      answers,
      authorities,
      additionals: [],
    });
  };

  const listener: DnsListener = await listenDns({
    host,
    port: initial.port ?? 0,
    handler: async (raw, context) => {
      const q = parseQuery(raw);
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
    },
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
