import { createSilentLogger } from '@cluster-dns/runtime';
import { waitFor } from '@cluster-dns/testkit';
import { type Fqdn, toFqdn, type ZoneChange } from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import type { StatsSnapshot } from '../chaos-stats.js';
import { createZoneSync } from '../zone-sync.js';
import { createWorkerPeers, type PeerLink, type PeerMessage, sumStats } from './worker-peers.js';

const Z = toFqdn('cluster.local');
const RB = { host: '127.0.0.1', port: 10053 };

/** An in-memory BroadcastChannel: each message reaches every other member, later, in order. */
function bus() {
  const members: Array<{ handler?: (m: PeerMessage) => void; open: boolean }> = [];
  const posted: PeerMessage[] = [];
  return {
    posted,
    link(): PeerLink {
      const me: { handler?: (m: PeerMessage) => void; open: boolean } = { open: true };
      members.push(me);
      return {
        post: (message) => {
          posted.push(message);
          const copy = structuredClone(message);
          for (const other of members)
            if (other !== me && other.open) queueMicrotask(() => other.open && other.handler?.(copy));
        },
        listen: (handler) => {
          me.handler = handler;
        },
        close: () => {
          me.open = false;
        },
      };
    },
  };
}

/** A cache that records what it was told to drop. */
function recordingCache() {
  const dropped: Array<Fqdn[] | 'zone'> = [];
  return {
    dropped,
    evictNames: (names: Iterable<Fqdn>) => {
      dropped.push([...names].sort());
      return 1;
    },
    flushZone: () => {
      dropped.push('zone');
      return 1;
    },
  };
}

/** Worker 0 runs a real zone sync on a scripted record-builder; the others mirror it. */
function workers(count: number, changes: ZoneChange[]) {
  const b = bus();
  const caches = Array.from({ length: count }, recordingCache);
  let transfers = 0;
  const peers = caches.map((_, index) =>
    createWorkerPeers({ link: b.link(), index, count, timeoutMs: 200, log: createSilentLogger() }),
  );
  const syncs = peers.map((p, index) => {
    const cache = caches[index] as ReturnType<typeof recordingCache>;
    return p.zoneSync(
      (changed) =>
        createZoneSync({
          serverFor: () => RB,
          allowedSources: () => ['127.0.0.1'],
          transfer: async () => {
            transfers++;
            return changes.shift() ?? { kind: 'up-to-date', serial: 7 };
          },
          soaSerial: async () => 5,
          evictNames: cache.evictNames,
          flushZone: cache.flushZone,
          changed,
          log: createSilentLogger(),
        }),
      cache,
    );
  });
  return { bus: b, caches, syncs, peers, transfers: () => transfers };
}

const stats = (hits: number, servers: string[]): StatsSnapshot => ({
  cachesize: 150,
  insertions: hits,
  evictions: 0,
  misses: 1,
  hits,
  auth: 0,
  servers,
  version: 'v',
});

describe('worker peers: one zone sync, every worker’s cache', () => {
  it('a NOTIFY that reaches another worker is fetched once by the leader, and every cache drops the change before it is answered', async () => {
    const name = toFqdn(`web.shop.svc.${Z}`);
    const w = workers(3, [
      { kind: 'up-to-date', serial: 5 },
      { kind: 'incremental', serial: 6, names: new Set([name]), programmed: [] },
    ]);
    // Entering push mode (worker 2 received it): the zone is flushed in every cache.
    expect(await w.syncs[2]?.notify(Z, '127.0.0.1')).toBe('accepted');
    for (const cache of w.caches) expect(cache.dropped).toEqual(['zone']);
    for (const sync of w.syncs) expect(sync?.isPushed(name)).toBe(true);

    const epochs = w.syncs.map((s) => s?.epochOf(name) ?? 0);
    expect(await w.syncs[1]?.notify(Z, '127.0.0.1')).toBe('accepted');
    // One IXFR per change for the whole process, not one per worker.
    expect(w.transfers()).toBe(2);
    const expected = [Z, toFqdn(`shop.svc.${Z}`), toFqdn(`svc.${Z}`), name].sort();
    for (const cache of w.caches) expect(cache.dropped.at(-1)).toEqual(expected);
    // Each worker's epoch moved, so an answer fetched across the change is not cached there.
    for (const [i, s] of w.syncs.entries()) expect(s.epochOf(name)).toBeGreaterThan(epochs[i] as number);
    expect(w.syncs.map((s) => s?.zones())).toEqual([
      [{ zone: Z, serial: 6 }],
      [{ zone: Z, serial: 6 }],
      [{ zone: Z, serial: 6 }],
    ]);
  });

  it('passes the leader’s refusal back, and fails a NOTIFY when no leader answers in time', async () => {
    const w = workers(2, []);
    expect(await w.syncs[1]?.notify(Z, '10.9.9.9')).toBe('refused');
    w.peers[0]?.close();
    expect(await w.syncs[1]?.notify(Z, '127.0.0.1')).toBe('failed');
  });

  it('a worker started after the zone was pushed learns the zones from the leader', async () => {
    const b = bus();
    const leaderCache = recordingCache();
    const leader = createWorkerPeers({ link: b.link(), index: 0, count: 2, timeoutMs: 200, log: createSilentLogger() });
    const sync0 = leader.zoneSync(
      (changed) =>
        createZoneSync({
          serverFor: () => RB,
          allowedSources: () => ['127.0.0.1'],
          transfer: async () => ({ kind: 'up-to-date', serial: 9 }),
          soaSerial: async () => 9,
          evictNames: leaderCache.evictNames,
          flushZone: leaderCache.flushZone,
          changed,
          log: createSilentLogger(),
        }),
      leaderCache,
    );
    await sync0.notify(Z, '127.0.0.1');
    const late = createWorkerPeers({ link: b.link(), index: 1, count: 2, timeoutMs: 200, log: createSilentLogger() });
    const sync1 = late.zoneSync(() => {
      throw new Error('only the leader runs a zone sync');
    }, recordingCache());
    await waitFor(() => sync1.zones().length > 0, { what: 'the leader’s answer to the late worker' });
    expect(sync1.zones()).toEqual([{ zone: Z, serial: 9 }]);
    expect(sync1.isPushed(toFqdn(`a.${Z}`))).toBe(true);
    expect(sync1.isPushed(toFqdn('example.org'))).toBe(false);
  });

  it('sums CHAOS statistics over every worker, and answers with the ones that replied when one does not', async () => {
    const b = bus();
    const peers = [0, 1, 2].map((index) =>
      createWorkerPeers({ link: b.link(), index, count: 3, timeoutMs: 100, log: createSilentLogger() }),
    );
    const asks = peers.map((p, i) => p.summedStats(() => stats(10 * (i + 1), [`10.0.0.1#53 ${i + 1} ${i}`])));
    const summed = await (asks[1] as () => Promise<StatsSnapshot>)();
    expect(summed).toMatchObject({ hits: 60, misses: 3, cachesize: 450, servers: ['10.0.0.1#53 6 3'] });
    peers[2]?.close();
    const partial = await (asks[0] as () => Promise<StatsSnapshot>)();
    expect(partial.hits).toBe(30);
  });

  it('sumStats matches servers by address and keeps each one', () => {
    expect(sumStats([stats(1, ['10.0.0.1#53 4 1', '10.0.0.2#53 2 0']), stats(2, ['10.0.0.2#53 3 1'])]).servers).toEqual(
      ['10.0.0.1#53 4 1', '10.0.0.2#53 5 1'],
    );
  });
});
