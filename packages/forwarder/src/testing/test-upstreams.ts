import { Buffer } from 'node:buffer';
import type { HostPort } from '@cluster-dns/runtime';
import { type ExchangeOptions, encodeMessage, parseQuery, QTYPE, type Rr } from '@cluster-dns/wire';
import { RouteTable } from '../config/route-table.js';
import { parseServerFlag } from '../config/server-flag.js';
import type { ForwardOptions } from '../plugins/forward/upstream.js';
import { UpstreamStats } from '../plugins/forward/upstream-stats.js';

/** What a fake upstream does with one query: records to answer with, an rcode, or silence. */
export type FakeAnswer =
  | {
      rcode?: number;
      answers?: Rr[];
      authorities?: Rr[];
      additionals?: Rr[];
      authoritative?: boolean;
      lowercase?: boolean;
    }
  | 'silent';

/**
 * Upstreams without sockets, for the forward stage's and resolution's unit tests: `answer` says
 * what the server at `host#port` answers to each name; the exchange echoes the question as sent
 * (unless `lowercase`, a server that does not preserve case) and carries our OPT back.
 */
export function fakeUpstreams(answer: (server: string, name: string, qtype: number) => FakeAnswer) {
  const sent: Array<{ server: string; query: Buffer }> = [];
  const exchangeUdp = async (server: HostPort, query: Buffer, _options: ExchangeOptions): Promise<Buffer> => {
    const id = `${server.host}#${server.port}`;
    sent.push({ server: id, query: Buffer.from(query) });
    const q = parseQuery(query);
    const what = answer(id, q.key, q.qtype);
    if (what === 'silent') throw new Error(`${id} is silent`);
    const name = what.lowercase ? q.key : q.qname;
    return encodeMessage({
      id: q.id,
      flags: {
        qr: true,
        opcode: 0,
        aa: what.authoritative ?? true,
        tc: false,
        rd: q.rd,
        ra: true,
        ad: false,
        cd: false,
        rcode: what.rcode ?? 0,
      },
      questions: [{ name, type: q.qtype, class: q.qclass }],
      answers: what.answers ?? [],
      authorities: what.authorities ?? [],
      additionals: [...(what.additionals ?? []), { name: '.', type: QTYPE.OPT, class: 1232, ttl: 0 }],
    });
  };
  const stats = new UpstreamStats();
  const options = (extra: Partial<ForwardOptions> = {}): ForwardOptions => ({
    exchangeUdp,
    timeoutMs: 1000,
    deadlineMs: 4000,
    stats,
    disabled: new Set(),
    randomCase: false,
    now: () => 1_000_000,
    ...extra,
  });
  return { sent, stats, options };
}

/** A route table from `--server` flags alone. */
export const routesOf = (...flags: string[]) =>
  new RouteTable({
    rules: flags.map((f) => parseServerFlag(f)),
    stubDomains: new Map(),
    upstreamNameservers: [],
    resolvConf: [],
  });
