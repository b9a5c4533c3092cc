import { describe, expect, it } from 'vitest';
import type { FeedUpdate } from './api-feed-protocol.js';
import { UpdateQueue } from './update-queue.js';

const update = (name: string, value: string | null, readAtMs = 1): FeedUpdate => ({
  resource: 'endpointslices',
  namespace: 'ns',
  name,
  value: value === null ? null : ({ serviceName: value } as unknown as FeedUpdate['value']),
  readAtMs,
});
const names = (updates: readonly FeedUpdate[]) => updates.map((u) => u.name);

describe('UpdateQueue: what the API worker holds for the main thread', () => {
  it('keeps one state per object, the latest, and counts those it replaced', () => {
    const q = new UpdateQueue();
    for (let i = 0; i < 1000; i++) q.push(update(`s-${i % 10}`, `v${i}`, i));
    expect(q.size).toBe(10);
    expect(q.coalesced).toBe(990);
    const batch = q.take(100);
    expect(batch.updates.map((u) => (u.value as unknown as { serviceName: string }).serviceName)).toEqual(
      Array.from({ length: 10 }, (_, k) => `v${990 + k}`),
    );
  });

  it('gives states in the order they were last read, in batches of at most max', () => {
    const q = new UpdateQueue();
    q.push(update('a', '1', 1));
    q.push(update('b', '1', 2));
    q.push(update('a', '2', 3));
    q.push(update('c', null, 4));
    const first = q.take(2);
    expect(names(first.updates)).toEqual(['b', 'a']);
    expect(first.pending).toBe(1);
    expect(first.oldestPendingMs).toBe(4);
    const second = q.take(2);
    expect(names(second.updates)).toEqual(['c']);
    expect(second.updates[0]?.value).toBeNull();
    expect(second.oldestPendingMs).toBe(0);
    expect(q.isEmpty).toBe(true);
  });

  it('sends a marker only with the batch that holds every update read before it', () => {
    const q = new UpdateQueue();
    q.push(update('a', '1'));
    q.push(update('b', '1'));
    q.mark({ kind: 'synced', resource: 'endpointslices', objects: 2 });
    q.push(update('c', '1'));
    const first = q.take(1);
    expect(names(first.updates)).toEqual(['a']);
    expect(first.markers).toEqual([]);
    const second = q.take(1);
    expect(names(second.updates)).toEqual(['b']);
    expect(second.markers).toEqual([{ kind: 'synced', resource: 'endpointslices', objects: 2 }]);
    expect(q.take(5).markers).toEqual([]);
  });

  it('holds a marker back until the newer state of an object read before it is sent', () => {
    const q = new UpdateQueue();
    q.push(update('a', '1'));
    q.mark({ kind: 'synced', resource: 'endpointslices', objects: 1 });
    // a's newer state moves behind the marker: synced must not reach the main thread before it.
    q.push(update('a', '2'));
    expect(q.take(0).markers).toEqual([]);
    const batch = q.take(1);
    expect(names(batch.updates)).toEqual(['a']);
    expect(batch.markers).toEqual([{ kind: 'synced', resource: 'endpointslices', objects: 1 }]);
  });

  it('keeps the first version folded into an object’s update, and tells a resource’s progress only when none of it waits', () => {
    const q = new UpdateQueue();
    const fp = { count: 1, sum: 7 };
    q.push({ ...update('a', '1'), version: 10 });
    q.progress('endpointslices', 10, fp, true);
    q.push({ ...update('b', '1'), version: 11 });
    q.progress('endpointslices', 11, fp, false);
    q.push({ ...update('a', '2'), version: 12 });
    q.progress('endpointslices', 12, fp, false);
    // b (11) goes first; a, still waiting with its change at 10, holds the progress back.
    const first = q.take(1);
    expect(first.updates.map((u) => [u.name, u.firstVersion, u.version])).toEqual([['b', 11, 11]]);
    expect(first.markers.filter((m) => m.kind === 'progress')).toEqual([]);
    const second = q.take(1);
    expect(second.updates.map((u) => [u.name, u.firstVersion, u.version])).toEqual([['a', 10, 12]]);
    // Then all of it is out: the stream's latest version, and the list that ended before it.
    expect(second.markers.filter((m) => m.kind === 'progress')).toEqual([
      { kind: 'progress', resource: 'endpointslices', version: 12, fingerprint: fp, listed: true },
    ]);
    expect(q.isEmpty).toBe(true);
    // A bookmark alone is a batch of its own.
    q.progress('endpointslices', 20, fp, false);
    expect(q.isEmpty).toBe(false);
    expect(q.take(10).markers).toEqual([
      { kind: 'progress', resource: 'endpointslices', version: 20, fingerprint: fp, listed: false },
    ]);
  });
});
