import { createSilentLogger } from '@cluster-dns/runtime';
import {
  buildQueryMessage,
  createQueryPipeline,
  type DecodedMessage,
  decodeMessage,
  encodeMessage,
  type Fqdn,
  QCLASS,
  QTYPE,
  type QueryContext,
  RCODE,
  scanResponse,
  toFqdn,
} from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import { type CacheCounters, ReplyCache } from './cache.js';
import { createQueryHandler } from './query-handler.js';
import type { Resolved } from './resolution.js';
import { RouteTable } from './route-table.js';
import { parseServerFlag } from './server-flag.js';
import type { UpstreamQuestion } from './upstream.js';

const udp: QueryContext = { transport: 'udp', remoteAddress: '127.0.0.1', remotePort: 4000 };
const policy = { negativeCache: true, negTtlSeconds: 0, minCacheTtlSeconds: 0, maxCacheTtlSeconds: 0 };

/** What an upstream would have said, normalised as resolution.ts leaves it (ID 0, no OPT, AA clear). */
function resolvedAnswer(routes: RouteTable, q: UpstreamQuestion, address: string, ttl = 60): Resolved {
  const wire = encodeMessage({
    id: 0,
    flags: { qr: true, opcode: 0, aa: false, tc: false, rd: true, ra: true, ad: false, cd: false, rcode: 0 },
    questions: [{ name: q.name, type: q.qtype, class: q.qclass }],
    answers: [{ name: q.name, type: QTYPE.A, class: 1, ttl, address }],
    authorities: [],
    additionals: [],
  });
  return { wire, scanned: scanResponse(wire), route: routes.routeFor(q.name) };
}

function handlerUnderTest(options: { forwardMax?: number; rules?: string[] } = {}) {
  let nowMs = 1_000_000;
  const counters: CacheCounters = { hits: 0, misses: 0, insertions: 0, evictions: 0 };
  const routes = new RouteTable({
    rules: (options.rules ?? ['192.0.2.53']).map((r) => parseServerFlag(r)),
    stubDomains: new Map(),
    upstreamNameservers: [],
    resolvConf: [],
  });
  const asked: UpstreamQuestion[] = [];
  let answer: (q: UpstreamQuestion) => Promise<Resolved> = async (q) => resolvedAnswer(routes, q, '192.0.2.1');
  const probes = new Set<Fqdn>();
  const handler = createQueryHandler({
    routes: () => routes,
    cache: new ReplyCache(100, counters, () => nowMs),
    counters,
    policy,
    forwardMax: options.forwardMax ?? 150,
    resolve: (q) => {
      asked.push(q);
      return answer(q);
    },
    stats: () => ({ cachesize: 100, ...counters, auth: 0, servers: ['192.0.2.53#53 3 0'], version: 'test' }),
    isLoopProbe: (name) => probes.has(name),
    log: createSilentLogger(),
    logQueries: false,
    now: () => nowMs,
  });
  const pipeline = createQueryPipeline({
    handle: handler.handle,
    recursionAvailable: true,
    classes: [QCLASS.IN, QCLASS.CH],
  });
  const ask = async (
    name: string,
    type: number = QTYPE.A,
    extra: { id?: number; qclass?: number; edns?: { udpSize: number } } = {},
  ): Promise<DecodedMessage> => {
    const raw = encodeMessage(buildQueryMessage(extra.id ?? 7, name, type, extra));
    const reply = await pipeline(raw, udp);
    if (!Buffer.isBuffer(reply)) throw new Error('no single reply');
    return decodeMessage(reply);
  };
  return {
    ask,
    asked,
    counters,
    probes,
    handler,
    advance: (ms: number) => {
      nowMs += ms;
    },
    answerWith: (fn: typeof answer) => {
      answer = fn;
    },
  };
}

describe('the forwarder query handler, without sockets', () => {
  it('asks upstream once, then answers from the cache with the remaining TTL and the asker spelling', async () => {
    const h = handlerUnderTest();
    const first = await h.ask('www.example.org');
    expect(first.answers.map((a) => [a.address, a.ttl])).toEqual([['192.0.2.1', 60]]);
    h.advance(12_000);
    const second = await h.ask('WWW.Example.ORG', QTYPE.A, { id: 99 });
    expect(second.id).toBe(99);
    expect(second.questions[0]?.name).toBe('WWW.Example.ORG.');
    expect(second.answers.map((a) => [a.address, a.ttl])).toEqual([['192.0.2.1', 48]]);
    expect(h.asked).toHaveLength(1);
    expect(h.counters).toMatchObject({ hits: 1, misses: 1, insertions: 1 });
  });

  it('never sets AA, on a miss or a hit, and always sets RA', async () => {
    const h = handlerUnderTest();
    expect((await h.ask('www.example.org')).flags).toMatchObject({ aa: false, ra: true });
    expect((await h.ask('www.example.org')).flags).toMatchObject({ aa: false, ra: true });
  });

  it('shares one upstream question among identical queries in flight, each answered with its own ID', async () => {
    const h = handlerUnderTest();
    let release: () => void = () => {};
    const gate = new Promise<void>((r) => {
      release = r;
    });
    h.answerWith(async (q) => {
      await gate;
      return resolvedAnswer(
        new RouteTable({ rules: [], stubDomains: new Map(), upstreamNameservers: [], resolvConf: [] }),
        q,
        '192.0.2.2',
      );
    });
    const replies = [1, 2, 3].map((id) => h.ask('shared.example.org', QTYPE.A, { id }));
    expect(h.handler.inFlight()).toBe(1);
    release();
    expect((await Promise.all(replies)).map((r) => [r.id, r.answers[0]?.address])).toEqual([
      [1, '192.0.2.2'],
      [2, '192.0.2.2'],
      [3, '192.0.2.2'],
    ]);
    expect(h.asked).toHaveLength(1);
  });

  it('answers SERVFAIL when the upstreams fail, and asks again on the next query', async () => {
    const h = handlerUnderTest();
    h.answerWith(() => Promise.reject(new Error('all upstreams down')));
    expect((await h.ask('down.example.org')).flags.rcode).toBe(RCODE.SERVFAIL);
    expect((await h.ask('down.example.org')).flags.rcode).toBe(RCODE.SERVFAIL);
    expect(h.asked).toHaveLength(2);
  });

  it('refuses at once past --dns-forward-max distinct questions in flight', async () => {
    const h = handlerUnderTest({ forwardMax: 1 });
    h.answerWith(() => new Promise(() => {}));
    void h.ask('one.example.org');
    expect((await h.ask('two.example.org')).flags.rcode).toBe(RCODE.REFUSED);
  });

  it('answers NXDOMAIN itself for a --server=/domain/ without servers', async () => {
    const h = handlerUnderTest({ rules: ['/blocked.example.org/', '192.0.2.53'] });
    expect((await h.ask('x.blocked.example.org')).flags.rcode).toBe(RCODE.NXDOMAIN);
    expect(h.asked).toHaveLength(0);
  });

  it('answers the CHAOS statistics, with an OPT when asked with EDNS, and refuses other CHAOS names', async () => {
    const h = handlerUnderTest();
    await h.ask('www.example.org');
    const misses = await h.ask('misses.bind', QTYPE.TXT, { qclass: QCLASS.CH, edns: { udpSize: 1232 } });
    expect(misses.answers.map((a) => a.text)).toEqual([['1']]);
    expect(misses.additionals.map((a) => a.type)).toEqual([QTYPE.OPT]);
    expect((await h.ask('nothing.bind', QTYPE.TXT, { qclass: QCLASS.CH })).flags.rcode).toBe(RCODE.REFUSED);
  });

  it('refuses its own loop probes instead of forwarding them again', async () => {
    const h = handlerUnderTest();
    h.probes.add(toFqdn('abc.loop-check.cluster-dns.invalid'));
    expect((await h.ask('abc.loop-check.cluster-dns.invalid', QTYPE.TXT)).flags.rcode).toBe(RCODE.REFUSED);
    expect(h.asked).toHaveLength(0);
  });
});
