import { buildQueryMessage, encodeMessage, type Fqdn, parseQuery, QTYPE, RCODE, toFqdn } from '@cluster-dns/wire';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { resolvedAnswer, testRoute } from '../../testing/test-chain.js';
import {
  type CachePolicy,
  cacheIdOf,
  cacheKeyOf,
  cacheTtlOf,
  MAX_SAME_HASH,
  monotonicMs,
  prefetchThreshold,
  ReplyCache,
  toCachedReply,
} from './cache.js';

const policy: CachePolicy = { negativeCache: true, negTtlSeconds: 0, minCacheTtlSeconds: 0, maxCacheTtlSeconds: 0 };
const queryOf = (name: string, qtype: number = QTYPE.A, dnssecOk = false) =>
  parseQuery(encodeMessage(buildQueryMessage(1, name, qtype, dnssecOk ? { edns: { udpSize: 1232, dnssecOk } } : {})));
/** An entry for `name`, stored at `nowMs`, through the route `routeId`. */
const entryFor = (name: string, nowMs: number, routeId = '.>upstream', ttl = 60) => {
  const r = resolvedAnswer(`${name}.`, QTYPE.A, { address: '192.0.2.1', ttl });
  return toCachedReply(cacheKeyOf(queryOf(name)), r.wire, r.scanned, ttl, { ...testRoute(), id: routeId }, nowMs);
};

describe('the reply cache, without sockets', () => {
  it('keys on name, type, class and the DO bit, in canonical case', () => {
    expect(cacheIdOf(queryOf('WWW.example.org'))).toBe(cacheIdOf(queryOf('www.EXAMPLE.org')));
    expect(cacheIdOf(queryOf('www.example.org', QTYPE.AAAA))).not.toBe(cacheIdOf(queryOf('www.example.org')));
    expect(cacheIdOf(queryOf('www.example.org', QTYPE.A, true))).not.toBe(cacheIdOf(queryOf('www.example.org')));
    expect(cacheKeyOf(queryOf('WWW.example.org')).name).toBe('www.example.org.');
  });

  afterEach(() => {
    vi.useRealTimers();
  });

  it('counts TTLs on a monotonic clock: a step of the wall clock neither lengthens nor expires them', () => {
    vi.useFakeTimers({ toFake: ['Date'], now: new Date('2026-12-02T12:00:00Z') });
    const cache = new ReplyCache(10);
    cache.set(entryFor('a.example.org', monotonicMs()));
    const q = queryOf('a.example.org');
    // NTP steps the clock back an hour: the TTL must not grow past the 60 s the upstream gave.
    vi.setSystemTime(new Date('2026-12-02T11:00:00Z'));
    expect(cache.lookup(q)?.remainingSeconds).toBeLessThanOrEqual(60);
    // And two hours forward: the entry is still fresh, not expired with the whole cache.
    vi.setSystemTime(new Date('2026-12-02T13:00:00Z'));
    expect(cache.lookup(q)).toMatchObject({ stale: false });
    expect(cache.lookup(q)?.remainingSeconds).toBeGreaterThan(50);
  });

  it('counts the remaining TTL down, keeps an expired entry for serve-stale, then drops it', () => {
    let now = 0;
    const cache = new ReplyCache(10, () => now, 100);
    cache.set(entryFor('a.example.org', now));
    const q = queryOf('a.example.org');
    now = 12_500;
    expect(cache.lookup(q)).toMatchObject({ remainingSeconds: 48, stale: false });
    now = 70_000;
    expect(cache.lookup(q)).toMatchObject({ remainingSeconds: 0, stale: true });
    now = 170_000;
    expect(cache.lookup(q)).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  it('pushes out the least recently used entry at the size bound, counting only live ones', () => {
    const cache = new ReplyCache(2, () => 0);
    for (const n of ['a', 'b']) cache.set(entryFor(`${n}.example.org`, 0));
    cache.lookup(queryOf('a.example.org'));
    cache.set(entryFor('c.example.org', 0));
    expect(cache.lookup(queryOf('b.example.org'))).toBeUndefined();
    expect(cache.lookup(queryOf('a.example.org'))).toBeDefined();
    expect(cache.counts).toEqual({ insertions: 3, evictions: 1, denialEvictions: 0 });
  });

  it('keeps an entry used in every eighth of the insertions, though a hit moves it in the LRU only that often', () => {
    // 64 entries: a hit moves its entry to the newest end once 8 insertions came since the last move.
    const cache = new ReplyCache(64, () => 0);
    const hot = queryOf('hot.example.org');
    cache.set(entryFor('hot.example.org', 0));
    for (let i = 0; i < 1000; i++) {
      cache.set(entryFor(`cold-${i}.example.org`, 0));
      // Asked after every eighth insertion, as a hit asked that often must survive any churn.
      if (i % 8 === 7) expect(cache.lookup(hot), `after ${i + 1} insertions`).toBeDefined();
    }
    // Cold entries are pushed out oldest first: the newest 63 are there, the one before them not.
    expect(cache.lookup(queryOf('cold-999.example.org'))).toBeDefined();
    expect(cache.lookup(queryOf('cold-937.example.org'))).toBeDefined();
    expect(cache.lookup(queryOf('cold-936.example.org'))).toBeUndefined();
    // Left alone, the hot entry goes the way of the others.
    for (let i = 0; i < 64; i++) cache.set(entryFor(`late-${i}.example.org`, 0));
    expect(cache.lookup(hot)).toBeUndefined();
  });

  it('keeps at most MAX_SAME_HASH entries on one question hash, however the names were picked', () => {
    const cache = new ReplyCache(100, () => 0);
    const names = Array.from({ length: MAX_SAME_HASH + 3 }, (_, i) => `n${i}.example.org`);
    // As if every name fell on one hash: what a hit compares stays bounded.
    for (const name of names) cache.set({ ...entryFor(name, 0), nameHash: 42 });
    expect(cache.size).toBe(MAX_SAME_HASH);
    expect(cache.counts.insertions).toBe(names.length);
    // The oldest made room, counted as evictions; nothing on other hashes is touched.
    expect(cache.counts.evictions).toBe(3);
    cache.set(entryFor('other.example.org', 0));
    expect(cache.size).toBe(MAX_SAME_HASH + 1);
    expect(cache.lookup(queryOf('other.example.org'))).toBeDefined();
  });

  it('drops by name, by zone and by route, each exactly the entries it names', () => {
    const cache = new ReplyCache(10, () => 0);
    cache.set(entryFor('a.shop.svc.cluster.local', 0, 'cluster.local.>server'));
    cache.set(entryFor('b.shop.svc.cluster.local', 0, 'cluster.local.>server'));
    cache.set(entryFor('www.example.org', 0));
    expect(cache.evictNames([toFqdn('a.shop.svc.cluster.local')])).toBe(1);
    expect(cache.flushZone(toFqdn('cluster.local'))).toBe(1);
    expect(cache.size).toBe(1);
    expect(cache.dropStale((name: Fqdn) => (name === 'www.example.org.' ? '.>upstream' : 'x'))).toBe(0);
    expect(cache.dropStale(() => 'moved')).toBe(1);
    expect(cache.size).toBe(0);
  });

  it('drops by a name several entries hold, before and after one of them leaves', () => {
    let now = 0;
    const cache = new ReplyCache(10, () => now);
    const name = 'x.shop.svc.cluster.local';
    const withDo = (ttl: number) => {
      const r = resolvedAnswer(`${name}.`, QTYPE.A, { address: '192.0.2.1', ttl });
      return toCachedReply(cacheKeyOf(queryOf(name, QTYPE.A, true)), r.wire, r.scanned, ttl, testRoute(), now);
    };
    cache.set(entryFor(name, now, '.>upstream', 10));
    cache.set(withDo(100));
    cache.set(entryFor('y.shop.svc.cluster.local', now));
    expect(cache.evictNames([toFqdn(name)])).toBe(2);
    expect(cache.size).toBe(1);
    // Again, and one of the two expires and is dropped on a lookup: the other is still found by name.
    cache.set(entryFor(name, now, '.>upstream', 10));
    cache.set(withDo(100));
    now = 20_000;
    expect(cache.lookup(queryOf(name))).toBeUndefined();
    expect(cache.size).toBe(2);
    expect(cache.evictNames([toFqdn(name)])).toBe(1);
    expect(cache.evictNames([toFqdn(name)])).toBe(0);
    expect(cache.evictNames([toFqdn('y.shop.svc.cluster.local')])).toBe(1);
    expect(cache.size).toBe(0);
  });

  it.each([
    ['an answer: its smallest TTL', { address: '192.0.2.1', ttl: 300 }, policy, 300],
    ['an NXDOMAIN: the SOA minimum', { rcode: RCODE.NXDOMAIN, soaMinimum: 120 }, policy, 120],
    [
      'an NXDOMAIN with --no-negcache: not kept',
      { rcode: RCODE.NXDOMAIN, soaMinimum: 120 },
      { ...policy, negativeCache: false },
      undefined,
    ],
    ['an NXDOMAIN without an SOA: not kept', { rcode: RCODE.NXDOMAIN }, policy, undefined],
    ['SERVFAIL: never kept', { rcode: RCODE.SERVFAIL }, policy, undefined],
    [
      'an answer with --max-cache-ttl 60',
      { address: '192.0.2.1', ttl: 300 },
      { ...policy, maxCacheTtlSeconds: 60 },
      60,
    ],
    ['an answer asking a year: 7 days (RFC 8767)', { address: '192.0.2.1', ttl: 31_536_000 }, policy, 604_800],
  ] as const)('keeps %s', (_what, answer, p, ttl) => {
    const r = resolvedAnswer('x.example.org.', QTYPE.A, answer);
    expect(cacheTtlOf(r.wire, r.scanned, p)).toBe(ttl);
  });

  it('draws each entry a prefetch point between a tenth and a fifth of its TTL, so entries cached together come due apart', () => {
    expect(prefetchThreshold(300, () => 0)).toBe(30);
    expect(prefetchThreshold(300, () => 0.999)).toBe(59);
    expect(prefetchThreshold(5, () => 0.5)).toBe(1);
    const drawn = Array.from({ length: 200 }, () => prefetchThreshold(300));
    expect(new Set(drawn).size).toBeGreaterThan(10);
    for (const t of drawn) {
      expect(t).toBeGreaterThanOrEqual(30);
      expect(t).toBeLessThan(60);
    }
  });
});
