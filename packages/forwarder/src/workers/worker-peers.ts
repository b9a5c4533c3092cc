import { BroadcastChannel } from 'node:worker_threads';
import type { Logger } from '@cluster-dns/runtime';
import { closestZone, type Fqdn } from '@cluster-dns/wire';
import type { StatsSnapshot } from '../chaos-stats.js';
import { type ZoneChanged, type ZoneSync, zoneSyncCounts } from '../zone-sync.js';

/** What workers tell each other (worker_threads' BroadcastChannel: every other worker hears it). */
export type PeerMessage =
  /** The leader applied a change: every other worker drops the same from its own cache. */
  | { t: 'zone'; zone: Fqdn; serial: number; dropped: 'zone' | Fqdn[] }
  /** A worker that (re)started asks the leader which zones are pushed. */
  | { t: 'zones?'; from: number }
  | { t: 'zones'; to: number; zones: Array<{ zone: Fqdn; serial: number }> }
  /** A NOTIFY that reached a worker other than the leader, handed to the leader. */
  | { t: 'notify'; id: number; from: number; zone: Fqdn; source: string }
  | { t: 'notified'; id: number; to: number; result: 'accepted' | 'refused' | 'failed' }
  /** A CHAOS statistics query: every worker's counts, to be summed. */
  | { t: 'stats?'; id: number; from: number }
  | { t: 'stats'; id: number; to: number; stats: StatsSnapshot }
  /** A worker's random-subdomain guard tripped: every other worker holds the domain too. */
  | { t: 'guard'; from: number; domain: Fqdn; forMs: number };

/** The channel between workers; an in-memory one makes this testable without threads. */
export interface PeerLink {
  post(message: PeerMessage): void;
  listen(handler: (message: PeerMessage) => void): void;
  close(): void;
}

/** The real link: a named BroadcastChannel, which keeps no worker alive on its own. */
export function broadcastLink(name: string): PeerLink {
  const channel = new BroadcastChannel(name);
  channel.unref();
  return {
    post: (message) => channel.postMessage(message),
    listen: (handler) => {
      channel.onmessage = (event) => handler((event as { data: PeerMessage }).data);
    },
    close: () => channel.close(),
  };
}

export interface WorkerPeers {
  readonly index: number;
  readonly count: number;
  /**
   * This worker's zone sync. The leader (worker 0) runs the real one, `own(changed)`, and tells
   * the others what each change dropped; every other worker mirrors it: it learns the serials and
   * epochs, drops the same names from `cache` (nothing, when the workers share one cache and the
   * leader's drop was already everyone's), and hands the NOTIFYs it receives to the leader.
   */
  zoneSync(
    own: (changed: ZoneChanged) => ZoneSync,
    cache: { evictNames(names: Iterable<Fqdn>): number; flushZone(zone: Fqdn): number },
  ): ZoneSync;
  /** CHAOS statistics summed over every worker that answers within the timeout. */
  summedStats(own: () => StatsSnapshot): () => Promise<StatsSnapshot>;
  /**
   * The random-subdomain guard's trips, shared: `hold` is called when another worker's guard
   * trips (a flood reaches every worker, spread by its source ports); the function returned tells
   * the others of this worker's trips. Holds go as durations: each thread has a clock of its own.
   */
  guardSync(hold: (domain: Fqdn, forMs: number) => void): (domain: Fqdn, forMs: number) => void;
  close(): void;
}

/**
 * Several forwarders in one process (--workers) kept as one: one IXFR per change for the whole
 * process (the leader's), whose drops reach every worker through their shared cache, and the
 * statistics counted over all of them.
 */
export function createWorkerPeers(deps: {
  link: PeerLink;
  index: number;
  count: number;
  /** How long a NOTIFY handed to the leader, or a statistics query, waits for the others. */
  timeoutMs: number;
  log: Logger;
}): WorkerPeers {
  const { link, index, count, log } = deps;
  let nextId = 1;
  const pending = new Map<number, (message: PeerMessage) => void>();
  const handlers: Array<(message: PeerMessage) => void> = [];
  let ownStats: (() => StatsSnapshot) | undefined;
  link.listen((message) => {
    if ('to' in message && message.to !== index) return;
    if ((message.t === 'notified' || message.t === 'stats') && pending.has(message.id)) {
      pending.get(message.id)?.(message);
      return;
    }
    if (message.t === 'stats?' && ownStats)
      link.post({ t: 'stats', id: message.id, to: message.from, stats: ownStats() });
    for (const handler of handlers) handler(message);
  });

  return {
    index,
    count,
    zoneSync(own, cache) {
      if (index === 0) return leader(own, link, handlers, log);
      return mirror(cache, link, handlers, index, deps.timeoutMs, () => nextId++, pending);
    },
    summedStats(own) {
      ownStats = own;
      return () =>
        new Promise((resolve) => {
          const id = nextId++;
          const all = [own()];
          const done = () => {
            clearTimeout(timer);
            pending.delete(id);
            resolve(sumStats(all));
          };
          const timer = setTimeout(done, deps.timeoutMs);
          pending.set(id, (message) => {
            if (message.t !== 'stats') return;
            all.push(message.stats);
            if (all.length === count) done();
          });
          link.post({ t: 'stats?', id, from: index });
          if (count === 1) done();
        });
    },
    guardSync(hold) {
      handlers.push((message) => {
        if (message.t === 'guard' && message.from !== index) hold(message.domain, message.forMs);
      });
      return (domain, forMs) => link.post({ t: 'guard', from: index, domain, forMs });
    },
    close: () => link.close(),
  };
}

function leader(
  own: Parameters<WorkerPeers['zoneSync']>[0],
  link: PeerLink,
  handlers: Array<(message: PeerMessage) => void>,
  log: Logger,
): ZoneSync {
  const sync = own((zone, serial, dropped) =>
    link.post({ t: 'zone', zone, serial, dropped: dropped === 'zone' ? 'zone' : [...dropped] }),
  );
  handlers.push((message) => {
    if (message.t === 'zones?') {
      const zones = sync.zones().filter((z): z is { zone: Fqdn; serial: number } => z.serial !== undefined);
      link.post({ t: 'zones', to: message.from, zones });
    } else if (message.t === 'notify') {
      // The 'zone' messages of the changes it fetched are posted first, so the worker that
      // received the NOTIFY has dropped them from its cache before it answers.
      void sync.notify(message.zone, message.source).then(
        (result) => link.post({ t: 'notified', id: message.id, to: message.from, result }),
        (error: unknown) => {
          log.warn('NOTIFY handed over by a worker failed', { zone: message.zone, err: error });
          link.post({ t: 'notified', id: message.id, to: message.from, result: 'failed' });
        },
      );
    }
  });
  return sync;
}

interface Mirrored {
  serial: number;
  epoch: number;
}

function mirror(
  cache: Parameters<WorkerPeers['zoneSync']>[1],
  link: PeerLink,
  handlers: Array<(message: PeerMessage) => void>,
  index: number,
  timeoutMs: number,
  nextId: () => number,
  pending: Map<number, (message: PeerMessage) => void>,
): ZoneSync {
  const zones = new Map<Fqdn, Mirrored>();
  const counts = zoneSyncCounts();
  handlers.push((message) => {
    if (message.t === 'zone') {
      const state = zones.get(message.zone) ?? { serial: message.serial, epoch: 0 };
      zones.set(message.zone, state);
      // Bumped with the drop, as the leader does: an answer fetched across it is not cached.
      state.epoch++;
      counts.invalidated +=
        message.dropped === 'zone' ? cache.flushZone(message.zone) : cache.evictNames(message.dropped);
      state.serial = message.serial;
    } else if (message.t === 'zones') {
      // At start: this cache is empty, so only the serials (and that the zones are pushed) matter.
      for (const { zone, serial } of message.zones) if (!zones.has(zone)) zones.set(zone, { serial, epoch: 0 });
    }
  });
  link.post({ t: 'zones?', from: index });
  return {
    counts,
    notify: (zone, source) =>
      new Promise((resolve) => {
        const id = nextId();
        const timer = setTimeout(() => {
          pending.delete(id);
          resolve('failed');
        }, timeoutMs);
        pending.set(id, (message) => {
          if (message.t !== 'notified') return;
          clearTimeout(timer);
          pending.delete(id);
          resolve(message.result);
        });
        link.post({ t: 'notify', id, from: index, zone, source });
      }),
    isPushed: (name) => closestZone(zones, name) !== undefined,
    epochOf: (name) => closestZone(zones, name)?.epoch ?? 0,
    // The leader checks the serials; what it finds reaches here as 'zone' messages.
    checkAll: async () => {},
    zones: () => [...zones].map(([zone, state]) => ({ zone, serial: state.serial })),
  };
}

/** dnsmasq's statistics over several caches: every count added up, servers matched by address. */
export function sumStats(all: readonly StatsSnapshot[]): StatsSnapshot {
  const first = all[0] as StatsSnapshot;
  const servers = new Map<string, [number, number]>();
  const sum = { cachesize: 0, insertions: 0, evictions: 0, misses: 0, hits: 0, auth: 0 };
  for (const stats of all) {
    for (const key of Object.keys(sum) as Array<keyof typeof sum>) sum[key] += stats[key];
    for (const line of stats.servers) {
      const [server = '', queries = '0', failures = '0'] = line.split(' ');
      const seen = servers.get(server) ?? [0, 0];
      servers.set(server, [seen[0] + Number(queries), seen[1] + Number(failures)]);
    }
  }
  return {
    ...sum,
    servers: [...servers].map(([server, [queries, failures]]) => `${server} ${queries} ${failures}`),
    version: first.version,
  };
}
