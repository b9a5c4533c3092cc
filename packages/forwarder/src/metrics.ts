import { Counter, collectDefaultMetrics, Gauge, type Registry } from 'prom-client';
import type { CacheCounters } from './cache.js';
import type { PushCounters } from './query-handler.js';
import type { ZoneSync } from './zone-sync.js';

/** What the metrics read at scrape time: counters the forwarder keeps for CHAOS stats too. */
export interface ForwarderMetricSources {
  /** Config reloads refused (invalid or unreadable ConfigMap or resolv file). */
  reloadFailures(): number;
  /** Upstream replies dropped, by reason (source, id, question, not-a-response, stray). */
  rejectedReplies(): ReadonlyMap<string, number>;
  cache: CacheCounters;
  cacheEntries(): number;
  push: PushCounters;
  zones(): ReturnType<ZoneSync['zones']>;
}

/**
 * The forwarder's own metrics (its `/metrics`), on the registry given. Counters kept elsewhere
 * (cache, push) are read at scrape time, so the query path pays nothing for them.
 */
export function createForwarderMetrics(registry: Registry, sources: ForwarderMetricSources) {
  collectDefaultMetrics({ register: registry });
  const counterFrom = (name: string, help: string, read: () => number) => {
    let seen = 0;
    new Counter({
      name,
      help,
      registers: [registry],
      collect() {
        const now = read();
        if (now > seen) this.inc(now - seen);
        seen = now;
      },
    });
  };
  counterFrom('clusterdns_forwarder_cache_hits_total', 'Queries answered from the cache.', () => sources.cache.hits);
  counterFrom(
    'clusterdns_forwarder_cache_misses_total',
    'Queries not answered from the cache.',
    () => sources.cache.misses,
  );
  counterFrom(
    'clusterdns_forwarder_stale_answers_total',
    'Expired answers served because every server of the route failed (RFC 8767 serve-stale).',
    () => sources.push.staleServed,
  );
  counterFrom(
    'clusterdns_forwarder_prefetches_total',
    'Popular entries refreshed in the background before they expired.',
    () => sources.push.prefetches,
  );
  // CoreDNS's reload plugin's name, so its alert (a bad Corefile push) fires on a bad ConfigMap.
  counterFrom(
    'coredns_reload_failed_total',
    'Config reloads refused: an invalid or unreadable ConfigMap or resolv file (the last good config stays).',
    () => sources.reloadFailures(),
  );
  const seenRejected = new Map<string, number>();
  new Counter({
    name: 'clusterdns_forwarder_rejected_replies_total',
    help: 'Upstream replies dropped because they do not answer a query of ours, by reason: source, id, question, not-a-response, stray (matches no query at all).',
    labelNames: ['reason'],
    registers: [registry],
    collect() {
      for (const [reason, now] of sources.rejectedReplies()) {
        const before = seenRejected.get(reason) ?? 0;
        if (now > before) this.labels(reason).inc(now - before);
        seenRejected.set(reason, now);
      }
    },
  });
  new Gauge({
    name: 'clusterdns_forwarder_cache_entries',
    help: 'Entries in the cache (stale ones kept for serve-stale included).',
    registers: [registry],
    collect() {
      this.set(sources.cacheEntries());
    },
  });
  const notifies = new Counter({
    name: 'clusterdns_forwarder_notifies_received_total',
    help: 'DNS NOTIFY messages received, by result: accepted (from a server of the zone’s route) or refused (from anyone else).',
    labelNames: ['result'],
    registers: [registry],
  });
  const transfers = new Counter({
    name: 'clusterdns_forwarder_zone_transfers_total',
    help: 'IXFRs fetched after a NOTIFY or SOA check, by result: incremental, full (the zone was flushed), up-to-date, failed.',
    labelNames: ['result'],
    registers: [registry],
  });
  const invalidated = new Counter({
    name: 'clusterdns_forwarder_cache_invalidated_total',
    help: 'Cache entries dropped because a pushed zone changed a name in them.',
    registers: [registry],
  });
  new Gauge({
    name: 'clusterdns_forwarder_zone_serial',
    help: 'SOA serial held for each pushed zone (its answers are invalidated on change).',
    labelNames: ['zone'],
    registers: [registry],
    collect() {
      for (const { zone, serial } of sources.zones()) if (serial !== undefined) this.labels(zone).set(serial);
    },
  });
  return {
    notify(result: 'accepted' | 'refused'): void {
      notifies.labels(result).inc();
    },
    transfer(result: string): void {
      transfers.labels(result).inc();
    },
    invalidated(entries: number): void {
      invalidated.inc(entries);
    },
  };
}
