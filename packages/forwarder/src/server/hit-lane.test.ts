import { Buffer } from 'node:buffer';
import { createSilentLogger } from '@cluster-dns/runtime';
import {
  buildQueryMessage,
  chainStages,
  createQueryPipeline,
  encodeMessage,
  finishFromTemplate,
  OPCODE,
  parseQuery,
  QCLASS,
  QTYPE,
  type QueryContext,
  type Reply,
  scanResponse,
} from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import type { ForwarderRequest } from '../config/forwarder-request.js';
import { cacheKeyOf, ReplyCache, toCachedReply } from '../plugins/cache/cache.js';
import { CacheStage } from '../plugins/cache/cache-stage.js';
import { testRoute } from '../testing/test-chain.js';
import { createHitLane, type HitLaneDeps } from './hit-lane.js';
import { ServerQueryCounts } from './query-counts.js';

const UDP: QueryContext = { transport: 'udp', remoteAddress: '127.0.0.1', remotePort: 4000, family: 4 };
const PAYLOAD = 1232;

/** An upstream's reply to `name`: `count` A records (60 s), normalised as resolution.ts leaves it. */
function upstreamReply(name: string, count: number) {
  const wire = encodeMessage({
    id: 0,
    flags: { qr: true, opcode: 0, aa: false, tc: false, rd: true, ra: true, ad: false, cd: false, rcode: 0 },
    questions: [{ name, type: QTYPE.A, class: 1 }],
    answers: Array.from({ length: count }, (_, i) => ({
      name,
      type: QTYPE.A,
      class: 1,
      ttl: 60,
      address: `192.0.2.${i + 1}`,
    })),
    authorities: [],
    additionals: [],
  });
  return { wire, scanned: scanResponse(wire), route: testRoute() };
}

/**
 * The forwarder's two ways to a cached answer, side by side and without sockets: the express
 * lane, and the query pipeline with the cache stage in front of an upstream that answers at once.
 */
function twoWays(options: { prefetchHits?: number; walkAtOnce?: HitLaneDeps['walkAtOnce'] } = {}) {
  let nowMs = 5_000_000;
  let bypass = false;
  const cache = new ReplyCache(100, () => nowMs, 3600);
  const stage = new CacheStage({
    cache,
    policy: { negativeCache: true, negTtlSeconds: 0, minCacheTtlSeconds: 0, maxCacheTtlSeconds: 0 },
    staleAllowed: () => true,
    prefetchHits: options.prefetchHits ?? 0,
    log: createSilentLogger(),
    logQueries: false,
    now: () => nowMs,
  });
  const upstreamAsked: string[] = [];
  const forward = async (request: ForwarderRequest): Promise<Reply> => {
    const q = request.query;
    upstreamAsked.push(q.key);
    // The big name's answer is over 512 octets: a client without EDNS gets it truncated.
    request.resolved = upstreamReply(q.key, q.key.startsWith('big.') ? 40 : 1);
    return finishFromTemplate(request.resolved.wire, q, request.limitBytes, { udpPayloadBytes: PAYLOAD });
  };
  // One set of counts for both ways, as the forwarder has.
  const counts = new ServerQueryCounts(() => ({ server: 'dns://test', zone: '.' }));
  const pipeline = createQueryPipeline({
    handle: chainStages<ForwarderRequest>([stage], forward),
    recursionAvailable: true,
    classes: [QCLASS.IN, QCLASS.CH, QCLASS.ANY],
    opcodes: [OPCODE.QUERY, OPCODE.NOTIFY],
    udpPayloadBytes: PAYLOAD,
    observe: (outcome) => counts.observe(outcome),
  });
  const lane = createHitLane({
    cacheStage: stage,
    queries: counts,
    udpPayloadBytes: PAYLOAD,
    bypass: () => bypass,
    ...(options.walkAtOnce ? { walkAtOnce: options.walkAtOnce } : {}),
  });
  return {
    lane,
    stage,
    upstreamAsked,
    counts,
    slow: async (raw: Buffer, context: QueryContext = UDP) => (await pipeline(raw, context)) as Buffer,
    /** Caches `name`'s A answer as a miss would, without counting a query. */
    store: (name: string) => {
      const answer = upstreamReply(`${name}.`, 1);
      cache.set(toCachedReply(cacheKeyOf(parseQuery(raw(name))), answer.wire, answer.scanned, 60, answer.route, nowMs));
    },
    advance: (ms: number) => {
      nowMs += ms;
    },
    setBypass: (on: boolean) => {
      bypass = on;
    },
  };
}

type QueryOptions = Parameters<typeof buildQueryMessage>[3] & { cd?: boolean };
const raw = (name: string, type: number = QTYPE.A, options: QueryOptions = {}) => {
  const message = encodeMessage(buildQueryMessage(0xbeef, name, type, options));
  if (options.cd) message[3] = (message[3] as number) | 0x10;
  return message;
};

describe('the express lane (cache hits before the pipeline)', () => {
  it('answers a fresh entry with the very bytes the whole way answers, whatever the EDNS, flags or size', async () => {
    const ways = twoWays();
    for (const name of ['svc-1.example.org', 'big.example.org']) await ways.slow(raw(name));
    ways.advance(7_000); // a remaining TTL below the stored one: the TTL fields are patched
    const shapes: Array<[string, Buffer]> = [];
    for (const name of ['svc-1.example.org', 'big.example.org'])
      for (const edns of [undefined, { udpSize: 512 }, { udpSize: 1232 }, { udpSize: 4096 }, { udpSize: 700 }])
        for (const flags of [{}, { rd: false }, { cd: true }])
          shapes.push([`${name} ${JSON.stringify({ edns, ...flags })}`, raw(name, QTYPE.A, { edns, ...flags })]);
    let laneAnswered = 0;
    for (const [what, query] of shapes) {
      const fast = ways.lane(query, 4, '127.0.0.1');
      expect(fast, what).toBeDefined();
      laneAnswered++;
      expect((fast as Buffer).equals(await ways.slow(query)), what).toBe(true);
    }
    expect(laneAnswered).toBe(30);
    // The big reply went out truncated to a client without EDNS, and whole to one with 4096.
    expect(((ways.lane(raw('big.example.org'), 4, '127.0.0.1') as Buffer)[2] as number) & 0x02).toBe(0x02);
    expect(ways.upstreamAsked).toEqual(['svc-1.example.org.', 'big.example.org.']);
  });

  it('leaves to the pipeline what only the pipeline or a later stage may answer', async () => {
    const ways = twoWays();
    await ways.slow(raw('svc-1.example.org'));
    const passed: Array<[string, Buffer]> = [
      ['a name in another case (found by the hash, not the octets)', raw('SVC-1.example.org')],
      ['a name not cached', raw('svc-2.example.org')],
      ['another type', raw('svc-1.example.org', QTYPE.AAAA)],
      ['class CH (the chaos stage)', raw('svc-1.example.org', QTYPE.A, { qclass: QCLASS.CH })],
      ['the DO bit (another entry)', raw('svc-1.example.org', QTYPE.A, { edns: { udpSize: 1232, dnssecOk: true } })],
      ['a NOTIFY', raw('svc-1.example.org', QTYPE.SOA, { opcode: OPCODE.NOTIFY })],
    ];
    for (const [what, query] of passed) expect(ways.lane(query, 4, '127.0.0.1'), what).toBeUndefined();
    // The mixed-case query is a hit the whole way, with the asker's case.
    const mixed = await ways.slow(raw('SVC-1.example.org'));
    expect(mixed.subarray(12, 30).toString('latin1')).toContain('SVC-1');
    expect(ways.stage.counts.hits).toBe(1);
  });

  it('steps aside while the loop guard must see every query, and for expired entries and due prefetches', async () => {
    const ways = twoWays({ prefetchHits: 1 });
    await ways.slow(raw('svc-1.example.org'));
    ways.setBypass(true);
    expect(ways.lane(raw('svc-1.example.org'), 4, '127.0.0.1')).toBeUndefined();
    ways.setBypass(false);
    expect(ways.lane(raw('svc-1.example.org'), 4, '127.0.0.1')).toBeDefined();
    // Under a tenth of the 60 s left, asked before: the cache stage must start the prefetch.
    ways.advance(55_000);
    expect(ways.lane(raw('svc-1.example.org'), 4, '127.0.0.1')).toBeUndefined();
    await ways.slow(raw('svc-1.example.org'));
    expect(ways.stage.counts.prefetches).toBe(1);
    // Expired: serve-stale or a miss is the cache stage's call.
    ways.advance(120_000);
    expect(ways.lane(raw('svc-1.example.org'), 4, '127.0.0.1')).toBeUndefined();
  });

  it('counts a hit as the pipeline counts one: cache hits, requests, responses and durations', async () => {
    const lane = twoWays();
    const whole = twoWays();
    for (const ways of [lane, whole]) ways.store('svc-1.example.org');
    // Three hits each, one of them from an IPv6 client: through the lane, and the whole way.
    for (const family of [6, 4, 4] as const) {
      expect(lane.lane(raw('svc-1.example.org'), family, '127.0.0.1')).toBeDefined();
      await whole.slow(raw('svc-1.example.org'), { ...UDP, family });
    }
    const series = (c: ServerQueryCounts) => ({
      requests: c.requests.entries(),
      responses: c.responses.entries(),
      duration: c.duration.values('d'),
    });
    expect(series(lane.counts)).toEqual(series(whole.counts));
    expect(series(lane.counts).requests).toContainEqual([
      { server: 'dns://test', zone: '.', proto: 'udp', family: '2', type: 'A' },
      1,
    ]);
    expect(lane.stage.counts).toEqual(whole.stage.counts);
    expect(lane.stage.counts.hits).toBe(3);
  });

  it('asks autopath for a kept walk when the cache has no answer, and answers with it, from the sender it names', () => {
    const asked: string[] = [];
    const walked = Buffer.from('walked');
    const ways = twoWays({
      walkAtOnce: (_raw, _q, from) => {
        asked.push(from);
        return from === '10.244.1.5' ? walked : undefined;
      },
    });
    expect(ways.lane(raw('api.example.com.testns.svc.cluster.local'), 4, '10.244.1.5')).toBe(walked);
    expect(ways.lane(raw('api.example.com.testns.svc.cluster.local'), 4, '10.244.2.5')).toBeUndefined();
    // A hit the chain need not see is the cache's: autopath is not asked.
    ways.store('svc-1.example.org');
    expect(ways.lane(raw('svc-1.example.org'), 4, '10.244.1.5')).toBeDefined();
    expect(asked).toEqual(['10.244.1.5', '10.244.2.5']);
  });
});
