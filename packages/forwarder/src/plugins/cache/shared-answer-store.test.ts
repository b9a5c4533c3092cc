import {
  buildQueryMessage,
  encodeMessage,
  PlainQuestion,
  parseQuery,
  QTYPE,
  readPlainQuery,
  toFqdn,
} from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import { resolvedAnswer, testRoute } from '../../testing/test-chain.js';
import { cacheKeyOf, toCachedReply } from './cache.js';
import { createSharedAnswerMemory, SharedAnswerStore } from './shared-answer-store.js';

const queryWire = (name: string, qtype: number = QTYPE.A, dnssecOk = false) =>
  encodeMessage(buildQueryMessage(7, name, qtype, dnssecOk ? { edns: { udpSize: 1232, dnssecOk } } : {}));
const queryOf = (name: string, qtype: number = QTYPE.A, dnssecOk = false) =>
  parseQuery(queryWire(name, qtype, dnssecOk));
const plain = (name: string, qtype: number = QTYPE.A, dnssecOk = false) => {
  const raw = queryWire(name, qtype, dnssecOk);
  const q = new PlainQuestion();
  if (!readPlainQuery(raw, q)) throw new Error('not a plain query');
  return { raw, q };
};
/** An entry for `name` (A, 192.0.2.1 unless told), stored at `nowMs`. */
const entryFor = (
  name: string,
  nowMs: number,
  opts: { routeId?: string; ttl?: number; address?: string; qtype?: number; dnssecOk?: boolean } = {},
) => {
  const ttl = opts.ttl ?? 60;
  const r = resolvedAnswer(`${name}.`, opts.qtype ?? QTYPE.A, { address: opts.address ?? '192.0.2.1', ttl });
  return toCachedReply(
    cacheKeyOf(queryOf(name, opts.qtype, opts.dnssecOk)),
    r.wire,
    r.scanned,
    ttl,
    { ...testRoute(), id: opts.routeId ?? '.>upstream' },
    nowMs,
  );
};

/** Two stores over one memory: what two worker threads hold. */
function twoWorkers(maxEntries = 100, ringBytes?: number, now = () => 0) {
  const memory = createSharedAnswerMemory({ maxEntries, ringBytes: ringBytes ?? maxEntries * 320 });
  return [new SharedAnswerStore(memory, now, 30), new SharedAnswerStore(memory, now, 30)] as const;
}

describe('the shared answer store, two workers over one memory', () => {
  it('a name one worker stored is a hit in the other, in any case, by type and DO bit', () => {
    const [a, b] = twoWorkers();
    a.set(entryFor('www.example.org', 0));
    const { raw, q } = plain('WWW.Example.ORG');
    const view = b.findPlain(raw, q);
    expect(view?.wire.equals(entryFor('www.example.org', 0).wire)).toBe(true);
    expect(view && b.confirm(view)).toBe(true);
    expect(b.lookup(queryOf('www.example.org'))).toMatchObject({ remainingSeconds: 60, stale: false });
    const aaaa = plain('www.example.org', QTYPE.AAAA);
    expect(b.findPlain(aaaa.raw, aaaa.q)).toBeUndefined();
    const dnssec = plain('www.example.org', QTYPE.A, true);
    expect(b.findPlain(dnssec.raw, dnssec.q)).toBeUndefined();
    expect([a.size, b.size, b.counts.insertions]).toEqual([1, 1, 1]);
  });

  it('keeps the TTL offsets and time, counts down and serves stale as the per-worker cache does', () => {
    let now = 1_000_000;
    const [a, b] = twoWorkers(100, undefined, () => now);
    a.set(entryFor('a.example.org', now));
    now += 12_500;
    const hit = b.lookup(queryOf('a.example.org'));
    expect(hit).toMatchObject({ remainingSeconds: 48, stale: false });
    expect(hit?.entry.ttlOffsets).toEqual(entryFor('a.example.org', 0).ttlOffsets);
    now += 60_000;
    expect(b.lookup(queryOf('a.example.org'))).toMatchObject({ remainingSeconds: 0, stale: true });
    now += 60_000;
    expect(b.lookup(queryOf('a.example.org'))).toBeUndefined();
  });

  it('a second answer for one question replaces the first', () => {
    const [a, b] = twoWorkers();
    a.set(entryFor('a.example.org', 0, { address: '192.0.2.1' }));
    b.set(entryFor('a.example.org', 0, { address: '192.0.2.2' }));
    const wire = a.lookup(queryOf('a.example.org'))?.entry.wire;
    expect(wire?.equals(entryFor('a.example.org', 0, { address: '192.0.2.2' }).wire)).toBe(true);
    expect(a.size).toBe(1);
  });

  it('a drop in one worker empties the name for all, and an answer asked across it is not kept', () => {
    const [a, b] = twoWorkers();
    a.set(entryFor('a.example.org', 0));
    a.set(entryFor('b.example.org', 0));
    const token = b.writeToken();
    expect(a.evictNames([toFqdn('a.example.org')])).toBe(1);
    expect(b.lookup(queryOf('a.example.org'))).toBeUndefined();
    expect(b.lookup(queryOf('b.example.org'))).toBeDefined();
    // Asked before the drop, answered after: the old state, not kept.
    b.set(entryFor('a.example.org', 0), token);
    expect(a.lookup(queryOf('a.example.org'))).toBeUndefined();
    b.set(entryFor('a.example.org', 0), b.writeToken());
    expect(a.lookup(queryOf('a.example.org'))).toBeDefined();
    expect(a.size).toBe(2);
  });

  it('drops by name what any worker wrote since the last drop, as the ring goes round', () => {
    const [a, b] = twoWorkers(1_000, 64 * 1024);
    for (let round = 0; round < 5; round++) {
      // Another worker writes (past the ring's size, from the second round on), then a change
      // drops ten of the newest names: each drop finds exactly its entry.
      for (let i = 0; i < 600; i++) b.set(entryFor(`r${round}-n${i}.example.org`, 0));
      const names = Array.from({ length: 10 }, (_, i) => toFqdn(`r${round}-n${590 + i}.example.org`));
      expect(a.evictNames(names)).toBe(10);
      expect(b.lookup(queryOf(`r${round}-n595.example.org`))).toBeUndefined();
      expect(b.lookup(queryOf(`r${round}-n589.example.org`))).toBeDefined();
      expect(a.evictNames(names)).toBe(0);
    }
  });

  it('flushes a zone and drops the answers of routes that moved', () => {
    const [a, b] = twoWorkers();
    a.set(entryFor('x.cluster.local', 0, { routeId: 'cluster.local.>pod' }));
    a.set(entryFor('y.example.org', 0, { routeId: '.>upstream' }));
    a.set(entryFor('z.example.net', 0, { routeId: '.>upstream' }));
    expect(b.flushZone(toFqdn('cluster.local'))).toBe(1);
    expect(b.dropStale((name) => (name.endsWith('example.net.') ? 'example.net.>stub' : '.>upstream'))).toBe(1);
    expect(a.lookup(queryOf('y.example.org'))).toBeDefined();
    expect(a.lookup(queryOf('z.example.net'))).toBeUndefined();
    expect(a.size).toBe(1);
  });

  it('stays within its bytes and entries under churn, the newest kept and the pushed-out counted', () => {
    const [a, b] = twoWorkers(1_000, 64 * 1024);
    const ringBytes = a.ringBytes;
    for (let i = 0; i < 20_000; i++) {
      (i % 2 === 0 ? a : b).set(entryFor(`n${i}.example.org`, 0));
      expect(a.usedBytes).toBeLessThanOrEqual(ringBytes);
      expect(a.size).toBeLessThanOrEqual(1_000);
    }
    expect(b.lookup(queryOf('n19999.example.org'))).toBeDefined();
    expect(b.lookup(queryOf('n0.example.org'))).toBeUndefined();
    const { insertions, evictions } = a.counts;
    expect(insertions).toBe(20_000);
    expect(evictions).toBe(insertions - a.size);
  });

  it('bounds entries by --cache-size even when the bytes would hold more', () => {
    const [a] = twoWorkers(10, 1024 * 1024);
    for (let i = 0; i < 50; i++) a.set(entryFor(`n${i}.example.org`, 0));
    expect(a.size).toBe(10);
    expect(a.lookup(queryOf('n49.example.org'))).toBeDefined();
    expect(a.lookup(queryOf('n39.example.org'))).toBeUndefined();
  });

  it('a read whose record was overwritten meanwhile is not confirmed (the reader sees a miss)', () => {
    const [a, b] = twoWorkers(1_000, 64 * 1024);
    a.set(entryFor('first.example.org', 0));
    const { raw, q } = plain('first.example.org');
    const view = b.findPlain(raw, q);
    expect(view).toBeDefined();
    // Another worker writes enough to go round the ring while this one reads.
    for (let i = 0; i < 2_000; i++) a.set(entryFor(`n${i}.example.org`, 0));
    expect(view && b.confirm(view)).toBe(false);
  });

  it('a count overwritten between a reader’s two reads of it is a miss, never an array of its size', () => {
    const [a, b] = twoWorkers(1_000, 64 * 1024);
    a.set(entryFor('first.example.org', 0));
    // Another thread's write lands just after the reader matched the question (the window
    // between questionAt's read of the counts and the find's): here a garbage TTL count.
    const reader = b as unknown as {
      ring32: Int32Array;
      questionAt: (w: number, ...rest: unknown[]) => number;
    };
    const questionAt = reader.questionAt.bind(b);
    reader.questionAt = (w, ...rest) => {
      const start = questionAt(w, ...rest);
      reader.ring32[w + 13] = 1_000_000; // Rec.TtlCount
      return start;
    };
    const { raw, q } = plain('first.example.org');
    expect(b.findPlain(raw, q)).toBeUndefined();
    expect(b.lookup(queryOf('first.example.org'))).toBeUndefined();
  });

  it('a writer stopped mid-write (a worker terminated) leaves nothing live, and the ring goes on', () => {
    const [a, b] = twoWorkers(1_000, 64 * 1024);
    a.set(entryFor('before.example.org', 0));
    // Room taken at the head, then nothing written: what a thread killed inside set() leaves.
    (a as unknown as { reserve(size: number): number }).reserve(512);
    expect(a.size).toBe(1);
    for (let i = 0; i < 1_500; i++) b.set(entryFor(`n${i}.example.org`, 0));
    expect(b.evictNames([toFqdn('n1499.example.org')])).toBe(1);
    expect(a.lookup(queryOf('n1498.example.org'))).toBeDefined();
    expect(a.usedBytes).toBeLessThanOrEqual(a.ringBytes);
  });

  it('counts hits beside the index, for prefetch, seen by every worker', () => {
    const [a, b] = twoWorkers();
    a.set(entryFor('a.example.org', 0));
    const { raw, q } = plain('a.example.org');
    for (let i = 0; i < 3; i++) {
      const view = b.findPlain(raw, q);
      if (view) b.countHit(view);
    }
    expect(a.findPlain(raw, q)?.hits).toBe(3);
  });
});
