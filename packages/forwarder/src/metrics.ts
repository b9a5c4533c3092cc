import { collectProcessMetrics } from '@cluster-dns/runtime';
import { type QueryOutcome, RCODE_MASK, rcodeLabel, typeLabel } from '@cluster-dns/wire';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { CacheCounters } from './cache.js';
import type { PushCounters } from './query-handler.js';
import { FastHistogram, LabelledCounts } from './query-stats.js';
import type { ZoneSync } from './zone-sync.js';

/** What the metrics read at scrape time: counters the forwarder keeps for CHAOS stats too. */
/** CoreDNS's request duration buckets: 0.25 ms doubling to 8.192 s. */
const DURATION_BUCKETS = Array.from({ length: 16 }, (_, k) => 0.00025 * 2 ** k);

export interface ForwarderMetricSources {
  /** CoreDNS's `server` label: `dns://<address>:<port>`, known once listening. */
  server(): string;
  /** Cache entries that hold a denial (NXDOMAIN, NODATA). */
  cacheDenialEntries(): number;
  /** Questions in flight upstream now. */
  inFlight(): number;
  /** Upstreams disabled because they loop back to us. */
  loopDisabled(): number;
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
  collectProcessMetrics(registry);
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
  // CoreDNS's names and labels where the concept is the same (its dashboards and mixin alerts
  // work unchanged): one server block, zone ".".
  const ZONE = '.';
  const labelledFrom = (
    name: string,
    help: string,
    labelNames: string[],
    read: () => Array<[Record<string, string>, number]>,
  ) => {
    const seen = new Map<string, number>();
    new Counter({
      name,
      help,
      labelNames,
      registers: [registry],
      collect() {
        for (const [labels, now] of read()) {
          const key = JSON.stringify(labels);
          const before = seen.get(key) ?? 0;
          if (now > before) this.labels(labels).inc(now - before);
          seen.set(key, now);
        }
      },
    });
  };
  const server = () => ({ server: sources.server() });
  labelledFrom(
    'coredns_cache_hits_total',
    'Cache hits, by type: success or denial (NXDOMAIN, NODATA).',
    ['server', 'type'],
    () => {
      const denial = sources.cache.denialHits ?? 0;
      return [
        [{ ...server(), type: 'success' }, sources.cache.hits - denial],
        [{ ...server(), type: 'denial' }, denial],
      ];
    },
  );
  labelledFrom('coredns_cache_misses_total', 'Cache misses.', ['server'], () => [[server(), sources.cache.misses]]);
  labelledFrom(
    'coredns_cache_evictions_total',
    'Live cache entries pushed out to make room, by type.',
    ['server', 'type'],
    () => {
      const denial = sources.cache.denialEvictions ?? 0;
      return [
        [{ ...server(), type: 'success' }, sources.cache.evictions - denial],
        [{ ...server(), type: 'denial' }, denial],
      ];
    },
  );
  new Gauge({
    name: 'coredns_cache_entries',
    help: 'Entries in the cache, by type: success or denial.',
    labelNames: ['server', 'type'],
    registers: [registry],
    collect() {
      const denial = sources.cacheDenialEntries();
      this.labels({ ...server(), type: 'denial' }).set(denial);
      this.labels({ ...server(), type: 'success' }).set(sources.cacheEntries() - denial);
    },
  });
  counterFrom(
    'coredns_forward_max_concurrent_rejects_total',
    'Queries refused because --dns-forward-max questions were in flight upstream.',
    () => sources.push.maxConcurrentRejects,
  );
  counterFrom(
    'clusterdns_forwarder_coalesced_queries_total',
    'Queries that joined an identical question already in flight upstream instead of asking again.',
    () => sources.push.coalesced,
  );
  new Gauge({
    name: 'clusterdns_forwarder_upstream_in_flight',
    help: 'Distinct questions in flight upstream now (at most --dns-forward-max).',
    registers: [registry],
    collect() {
      this.set(sources.inFlight());
    },
  });
  new Gauge({
    name: 'clusterdns_forwarder_upstreams_loop_disabled',
    help: 'Upstreams disabled because they send our queries back to us (--dns-loop-detect).',
    registers: [registry],
    collect() {
      this.set(sources.loopDisabled());
    },
  });

  const requests = new LabelledCounts();
  labelledFrom(
    'coredns_dns_requests_total',
    'DNS requests, by transport (proto), address family (1: IPv4, 2: IPv6) and query type.',
    ['server', 'zone', 'proto', 'family', 'type'],
    () => requests.entries(),
  );
  const responses = new LabelledCounts();
  labelledFrom('coredns_dns_responses_total', 'DNS responses, by rcode.', ['server', 'zone', 'rcode', 'plugin'], () =>
    responses.entries(),
  );
  const duration = new FastHistogram(
    registry,
    'coredns_dns_request_duration_seconds',
    'Time from a query arriving to its reply, by query type.',
    DURATION_BUCKETS,
  );
  // Per try, counted the same cheap way: a miss pays a few map lookups, not label hashing.
  const forwardRequests = new LabelledCounts();
  labelledFrom('coredns_forward_requests_total', 'Queries sent to each upstream (every try).', ['to'], () =>
    forwardRequests.entries(),
  );
  const forwardResponses = new LabelledCounts();
  labelledFrom('coredns_forward_responses_total', 'Replies from each upstream, by rcode.', ['to', 'rcode'], () =>
    forwardResponses.entries(),
  );
  const forwardDuration = new FastHistogram(
    registry,
    'coredns_forward_request_duration_seconds',
    'Round-trip time of each upstream try that got a reply, by rcode.',
    DURATION_BUCKETS,
  );
  const forwardFailures = new LabelledCounts();
  labelledFrom(
    'coredns_forward_healthcheck_failures_total',
    'Upstream tries that got no reply (timeout or error); the next server of the route is tried.',
    ['to'],
    () => forwardFailures.entries(),
  );
  const lastTryAnswered = new Map<string, boolean>();
  new Gauge({
    name: 'clusterdns_forwarder_upstream_healthy',
    help: '1 when the last try of the upstream got a reply (any rcode), 0 when it got none.',
    labelNames: ['to'],
    registers: [registry],
    collect() {
      for (const [to, answered] of lastTryAnswered) this.labels(to).set(answered ? 1 : 0);
    },
  });
  const base = () => ({ server: sources.server(), zone: ZONE });

  return {
    /** One message through the query pipeline (the pipeline's `observe`): counts only, no labels hashed. */
    observeQuery(outcome: QueryOutcome): void {
      const { query, reply, context } = outcome;
      if (!query) return;
      const family = context.remoteAddress.includes(':') ? '2' : '1';
      const type = typeLabel(query.qtype);
      requests.inc(`${context.transport}|${family}|${type}`, () => ({
        ...base(),
        proto: context.transport,
        family,
        type,
      }));
      duration.observe(type, () => ({ ...base(), type }), Number(process.hrtime.bigint() - outcome.startedNs) / 1e9);
      const rcode = reply ? rcodeLabel(reply.readUInt16BE(2) & RCODE_MASK) : 'dropped';
      responses.inc(rcode, () => ({ ...base(), rcode, plugin: '' }));
    },
    /** One upstream try: its rcode, or undefined when it got no reply. */
    upstreamTry(to: string, rcode: number | undefined, seconds: number): void {
      forwardRequests.inc(to, () => ({ to }));
      lastTryAnswered.set(to, rcode !== undefined);
      if (rcode === undefined) {
        forwardFailures.inc(to, () => ({ to }));
        return;
      }
      const name = rcodeLabel(rcode);
      const key = `${to}|${name}`;
      forwardResponses.inc(key, () => ({ to, rcode: name }));
      forwardDuration.observe(key, () => ({ to, rcode: name }), seconds);
    },
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
