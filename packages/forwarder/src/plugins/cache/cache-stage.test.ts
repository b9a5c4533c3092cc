import { createSilentLogger } from '@cluster-dns/runtime';
import {
  buildBareResponse,
  chainStages,
  encodeMessage,
  type Fqdn,
  finishFromTemplate,
  QTYPE,
  RCODE,
  type Reply,
  scanResponse,
  toFqdn,
} from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import type { Resolved } from '../../config/forwarder-request.js';
import { type ForwarderRequest, RESOLVED } from '../../config/forwarder-request.js';
import { askThrough, requestFor, resolvedAnswer, testRoute } from '../../testing/test-chain.js';
import { type AnswerCache, ReplyCache } from './cache.js';
import { CacheStage } from './cache-stage.js';
import { createSharedAnswerMemory, SharedAnswerStore } from './shared-answer-store.js';

/** Each test runs over both caches: a worker's own, and the store every worker shares. */
type Store = 'per-worker' | 'shared';
const STORES: Store[] = ['per-worker', 'shared'];
const cacheOf = (store: Store, now: () => number, memory?: SharedArrayBuffer): AnswerCache =>
  store === 'shared'
    ? new SharedAnswerStore(memory ?? createSharedAnswerMemory({ maxEntries: 100, ringBytes: 64 * 1024 }), now, 86_400)
    : new ReplyCache(100, now, 86_400);

/**
 * The cache stage in front of a fake forward stage: `answer` decides what "upstream" says (a
 * Resolved, or undefined for no answer at all), or `refuse` makes it answer REFUSED at once.
 */
function cacheUnderTestOf(
  options: {
    negativeCache?: boolean;
    pushed?: boolean;
    prefetchHits?: number;
    store?: Store;
    /** Another worker's: the shared store's memory. */
    memory?: SharedArrayBuffer;
  } = {},
) {
  let nowMs = 1_000_000;
  const asked: Fqdn[] = [];
  let answer: (name: Fqdn, qtype: number) => Promise<Resolved | undefined> = async (name, qtype) =>
    resolvedAnswer(name, qtype, { address: '192.0.2.1' });
  let refuse = false;
  const cache = cacheOf(options.store ?? 'per-worker', () => nowMs, options.memory);
  const stage = new CacheStage({
    cache,
    policy: {
      negativeCache: options.negativeCache ?? true,
      negTtlSeconds: 0,
      minCacheTtlSeconds: 0,
      maxCacheTtlSeconds: 0,
    },
    push: { isPushed: () => options.pushed ?? false },
    staleAllowed: () => true,
    prefetchHits: options.prefetchHits ?? 0,
    log: createSilentLogger(),
    logQueries: false,
    now: () => nowMs,
  });
  const forward = (request: ForwarderRequest): Reply | Promise<Reply> => {
    const q = request.query;
    if (refuse) return buildBareResponse(q, RCODE.REFUSED, { recursionAvailable: true });
    asked.push(q.key);
    return answer(q.key, q.qtype).then((resolved) => {
      if (!resolved) return buildBareResponse(q, RCODE.SERVFAIL, { recursionAvailable: true });
      request.resolved = resolved;
      // As the real forward stage: the cache asked to write the reply itself.
      return request.repliesFromResolved ? RESOLVED : finishFromTemplate(resolved.wire, q, request.limitBytes);
    });
  };
  const ask = askThrough(chainStages<ForwarderRequest>([stage], forward));
  return {
    ask,
    asked,
    stage,
    cache,
    advance: (ms: number) => {
      nowMs += ms;
    },
    answerWith: (fn: typeof answer) => {
      answer = fn;
    },
    refuseAll: (on: boolean) => {
      refuse = on;
    },
    /** A pushed zone change: its names dropped from the cache. */
    dropNames: (...names: string[]) => {
      cache.evictNames(names.map((n) => toFqdn(n)));
    },
  };
}

/** A promise the test resolves when it chooses: an upstream that answers when told. */
function gated() {
  let release: () => void = () => {};
  const gate = new Promise<void>((r) => {
    release = r;
  });
  return { gate, release };
}

describe.each(STORES)('the cache stage over a %s cache, without sockets', (store) => {
  const cacheUnderTest = (options: Parameters<typeof cacheUnderTestOf>[0] = {}) =>
    cacheUnderTestOf({ store, ...options });
  it('asks once, then answers from the cache with the remaining TTL, the asker’s ID and spelling', async () => {
    const c = cacheUnderTest();
    expect((await c.ask('www.example.org')).answers.map((a) => [a.address, a.ttl])).toEqual([['192.0.2.1', 60]]);
    c.advance(12_000);
    const hit = await c.ask('WWW.Example.ORG', QTYPE.A, { id: 99 });
    expect(hit.id).toBe(99);
    expect(hit.questions[0]?.name).toBe('WWW.Example.ORG.');
    expect(hit.answers.map((a) => [a.address, a.ttl])).toEqual([['192.0.2.1', 48]]);
    expect(hit.flags).toMatchObject({ aa: false, ra: true });
    expect(c.asked).toHaveLength(1);
    expect(c.stage.counts).toMatchObject({ hits: 1, misses: 1 });
    expect(c.cache.counts.insertions).toBe(1);
  });

  it('keeps no answer made for one client (a walk the Pod’s forwarder did for the pod a node cache named)', async () => {
    const c = cacheUnderTest();
    c.answerWith(async (name, qtype) => ({ ...resolvedAnswer(name, qtype, { address: '192.0.2.1' }), personal: true }));
    await c.ask('api.example.com.testns.svc.cluster.local');
    await c.ask('api.example.com.testns.svc.cluster.local');
    expect(c.asked).toHaveLength(2);
    expect(c.cache.counts.insertions).toBe(0);
  });

  it('answers a hit synchronously: no promise, no timer', async () => {
    const c = cacheUnderTest();
    await c.ask('sync.example.org');
    const reply = c.stage.serve(requestFor('sync.example.org'), () => {
      throw new Error('a hit must not go on');
    });
    expect(Buffer.isBuffer(reply)).toBe(true);
  });

  it('shares one question among identical queries in flight, each answered with its own ID', async () => {
    const c = cacheUnderTest();
    const { gate, release } = gated();
    c.answerWith(async (name, qtype) => {
      await gate;
      return resolvedAnswer(name, qtype, { address: '192.0.2.2' });
    });
    const replies = [1, 2, 3].map((id) => c.ask('shared.example.org', QTYPE.A, { id }));
    release();
    expect((await Promise.all(replies)).map((r) => [r.id, r.answers[0]?.address])).toEqual([
      [1, '192.0.2.2'],
      [2, '192.0.2.2'],
      [3, '192.0.2.2'],
    ]);
    expect(c.asked).toHaveLength(1);
    expect(c.stage.counts.coalesced).toBe(2);
  });

  it('answers SERVFAIL when nobody answered, caches nothing, and asks again next time', async () => {
    const c = cacheUnderTest();
    c.answerWith(async () => undefined);
    expect((await c.ask('down.example.org')).flags.rcode).toBe(RCODE.SERVFAIL);
    expect((await c.ask('down.example.org')).flags.rcode).toBe(RCODE.SERVFAIL);
    expect(c.asked).toHaveLength(2);
    expect(c.cache.size).toBe(0);
  });

  it('passes a reply the next stage has at hand (REFUSED past --dns-forward-max) straight back', async () => {
    const c = cacheUnderTest();
    c.refuseAll(true);
    expect((await c.ask('busy.example.org')).flags.rcode).toBe(RCODE.REFUSED);
    expect(c.cache.size).toBe(0);
  });

  it.each([
    [{ negativeCache: true }, 1],
    [{ negativeCache: false }, 0],
    // A pushed zone tells us when the name appears: its denials are kept despite --no-negcache.
    [{ negativeCache: false, pushed: true }, 1],
  ])('keeps an NXDOMAIN (SOA minimum 60) with %j: %i entries', async (options, entries) => {
    const c = cacheUnderTest(options);
    c.answerWith(async (name, qtype) => resolvedAnswer(name, qtype, { rcode: RCODE.NXDOMAIN, soaMinimum: 60 }));
    expect((await c.ask('gone.example.org')).flags.rcode).toBe(RCODE.NXDOMAIN);
    expect(c.cache.size).toBe(entries);
  });

  it('does not keep an answer fetched across a zone change (a drop while it was out)', async () => {
    const c = cacheUnderTest();
    const { gate, release } = gated();
    c.answerWith(async (name, qtype) => {
      await gate;
      return resolvedAnswer(name, qtype, { address: '192.0.2.3' });
    });
    const reply = c.ask('moving.example.org');
    c.dropNames('moving.example.org');
    release();
    expect((await reply).answers[0]?.address).toBe('192.0.2.3');
    expect(c.cache.size).toBe(0);
  });

  it('serves an expired answer when the upstream fails (RFC 8767), with TTL 30', async () => {
    const c = cacheUnderTest();
    await c.ask('old.example.org');
    c.advance(61_000);
    c.answerWith(async () => undefined);
    const stale = await c.ask('old.example.org');
    expect(stale.answers.map((a) => [a.address, a.ttl])).toEqual([['192.0.2.1', 30]]);
    expect(c.stage.counts.staleServed).toBe(1);
    // Held for the recheck time: not asked again meanwhile.
    await c.ask('old.example.org');
    expect(c.asked).toHaveLength(2);
  });

  it('prefetches an entry asked often once a tenth of its TTL is left, once', async () => {
    const c = cacheUnderTest({ prefetchHits: 2 });
    await c.ask('hot.example.org');
    await c.ask('hot.example.org');
    c.advance(55_000);
    c.answerWith(async (name, qtype) => resolvedAnswer(name, qtype, { address: '192.0.2.4', route: testRoute() }));
    const hit = await c.ask('hot.example.org');
    expect(hit.answers.map((a) => [a.address, a.ttl])).toEqual([['192.0.2.1', 5]]);
    expect(c.stage.counts.prefetches).toBe(1);
    expect(c.asked).toHaveLength(2);
  });
});

describe.each(STORES)('loadbalance over a %s cache: a route’s cached A records served in a turning order', (store) => {
  const cacheUnderTest = () => cacheUnderTestOf({ store });
  const threeAddresses = (loadbalance: boolean) => async (name: Fqdn, qtype: number) => {
    const wire = encodeMessage({
      id: 0,
      flags: { qr: true, opcode: 0, aa: false, tc: false, rd: true, ra: true, ad: false, cd: false, rcode: 0 },
      questions: [{ name, type: qtype, class: 1 }],
      answers: ['192.0.2.1', '192.0.2.2', '192.0.2.3'].map((address) => ({
        name,
        type: QTYPE.A,
        class: 1,
        ttl: 60,
        address,
      })),
      authorities: [],
      additionals: [],
    });
    return { wire, scanned: scanResponse(wire), route: { ...testRoute(), loadbalance } } satisfies Resolved;
  };
  const firstOf = async (c: ReturnType<typeof cacheUnderTestOf>) =>
    (await c.ask('pool.example.org')).answers.map((a) => a.address);

  it('starts each hit one record further on, every record still there with the remaining TTL', async () => {
    const c = cacheUnderTest();
    c.answerWith(threeAddresses(true));
    const miss = await firstOf(c);
    c.advance(1000);
    const hits = [await firstOf(c), await firstOf(c), await firstOf(c)];
    expect(miss).toEqual(['192.0.2.1', '192.0.2.2', '192.0.2.3']);
    expect(hits.map((h) => h[0])).toEqual(['192.0.2.1', '192.0.2.2', '192.0.2.3']);
    expect(hits[1]).toEqual(['192.0.2.2', '192.0.2.3', '192.0.2.1']);
    for (const hit of hits) expect([...hit].sort()).toEqual(miss);
    expect((await c.ask('pool.example.org')).answers.map((a) => a.ttl)).toEqual([59, 59, 59]);
  });

  it('keeps the order of a route without loadbalance', async () => {
    const c = cacheUnderTest();
    c.answerWith(threeAddresses(false));
    await firstOf(c);
    expect(new Set([(await firstOf(c)).join(), (await firstOf(c)).join()])).toEqual(
      new Set(['192.0.2.1,192.0.2.2,192.0.2.3']),
    );
  });
});

describe('two workers over one shared store', () => {
  it('a name one worker cached is a hit in the other, and a drop in one is gone from both', async () => {
    const memory = createSharedAnswerMemory({ maxEntries: 100, ringBytes: 64 * 1024 });
    const a = cacheUnderTestOf({ store: 'shared', memory });
    const b = cacheUnderTestOf({ store: 'shared', memory });
    await a.ask('one.example.org');
    expect((await b.ask('ONE.example.org')).answers.map((r) => r.address)).toEqual(['192.0.2.1']);
    expect([a.asked, b.asked]).toEqual([['one.example.org.'], []]);
    expect(b.stage.counts).toMatchObject({ hits: 1, misses: 0 });
    a.cache.evictNames(['one.example.org.' as Fqdn]);
    await b.ask('one.example.org');
    expect(b.asked).toEqual(['one.example.org.']);
  });
});
