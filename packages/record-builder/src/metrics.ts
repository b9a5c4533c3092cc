import type { Buffer } from 'node:buffer';
import {
  collectProcessMetrics,
  gaugeFrom,
  HistogramStore,
  LabelledCounts,
  labelledFrom,
  ProgrammingLatency,
  registerHistogram,
  registerProgrammingLatency,
  typeIndexOf,
} from '@cluster-dns/runtime';
import {
  type DnsListener,
  FLAG,
  type ProgrammedChange,
  QTYPE,
  type QueryOutcome,
  RCODE,
  RCODE_MASK,
  rcodeLabel,
  typeLabel,
  u16,
} from '@cluster-dns/wire';
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { ZoneSystem } from './answer-cache.js';
import type { ResourceName } from './watched-resources.js';

/** kube-dns's skydns buckets: 1 ms, 3 ms, then Prometheus's defaults. */
const DURATION_BUCKETS = [0.001, 0.003, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const SIZE_BUCKETS = [
  0, 512, 1024, 1500, 2048, 4096, 8192, 12288, 16384, 20480, 24576, 28672, 32768, 36864, 40960, 45056, 49152, 53248,
  57344, 61440, 65536,
];

const ERROR_CAUSES: Record<number, string> = {
  [RCODE.NXDOMAIN]: 'nxdomain',
  [RCODE.SERVFAIL]: 'servfail',
  [RCODE.REFUSED]: 'refused',
};

/** Every metric of the record-builder, on the registry it is given (never the global one). */
export function createRecordBuilderMetrics(registry: Registry) {
  collectProcessMetrics(registry);
  // The DNS listener's TCP backpressure, read at scrape time once it is listening.
  let listener: Pick<DnsListener, 'tcpStalls' | 'tcpUnsentBytes'> | undefined;
  labelledFrom(
    registry,
    'clusterdns_recordbuilder_tcp_stalled_closed_total',
    'DNS TCP connections closed because the client stopped reading its replies: timeout (--tcp-write-timeout) or budget (--max-tcp-unsent-total-bytes).',
    ['reason'],
    () => [
      [{ reason: 'timeout' }, listener?.tcpStalls().timeout ?? 0],
      [{ reason: 'budget' }, listener?.tcpStalls().budget ?? 0],
    ],
  );
  gaugeFrom(
    registry,
    'clusterdns_recordbuilder_tcp_unsent_bytes',
    'Reply octets waiting in DNS TCP connections for their clients to read them.',
    [],
    () => [[{}, listener?.tcpUnsentBytes() ?? 0]],
  );
  // The per-query series: plain counts in arrays, turned into series when scraped (runtime's
  // query-stats.ts). prom-client would hash each label set per call, the bulk of a query's garbage.
  const requestCount = new LabelledCounts();
  labelledFrom(
    registry,
    'skydns_skydns_dns_request_count_total',
    'Counter of DNS requests made (kube-dns name), by system: auth or reverse.',
    ['system'],
    () => requestCount.entries(),
  );
  const requestDuration = new HistogramStore(DURATION_BUCKETS);
  registerHistogram(
    registry,
    'skydns_skydns_dns_request_duration_seconds',
    'Histogram of the time (in seconds) each request took (kube-dns name).',
    requestDuration,
  );
  const responseSize = new HistogramStore(SIZE_BUCKETS);
  registerHistogram(
    registry,
    'skydns_skydns_dns_response_size_bytes',
    'Size of the returned response in bytes (kube-dns name).',
    responseSize,
  );
  const errorCount = new LabelledCounts();
  labelledFrom(
    registry,
    'skydns_skydns_dns_error_count_total',
    'Counter of DNS requests resulting in an error (kube-dns name), by system and cause.',
    ['system', 'cause'],
    () => errorCount.entries(),
  );
  const requests = new LabelledCounts();
  labelledFrom(
    registry,
    'clusterdns_recordbuilder_requests_total',
    'DNS requests answered, by query type and response code.',
    ['qtype', 'rcode', 'transport'],
    () => requests.entries(),
  );
  const malformed = new Counter({
    name: 'clusterdns_recordbuilder_malformed_queries_total',
    help: 'Queries that could not be parsed: answered FORMERR when the header was readable, else dropped.',
    labelNames: ['action'],
    registers: [registry],
  });
  const endpoints = new Gauge({
    name: 'clusterdns_recordbuilder_endpoints',
    help: 'Endpoints held (published or not), from EndpointSlices or Endpoints.',
    registers: [registry],
  });
  const services = new Gauge({
    name: 'clusterdns_recordbuilder_services',
    help: 'Services known to the store.',
    registers: [registry],
  });
  const cacheEntries = new Gauge({
    name: 'clusterdns_recordbuilder_answer_cache_entries',
    help: 'Answers kept in wire form, ready to send.',
    registers: [registry],
  });
  const cacheBytes = new Gauge({
    name: 'clusterdns_recordbuilder_answer_cache_bytes',
    help: 'Bytes the ready answers take (bounded by --answer-cache-mib).',
    registers: [registry],
  });
  const backlog = new Gauge({
    name: 'clusterdns_recordbuilder_event_backlog',
    help: 'Objects read from the API whose latest state is not applied yet (one per object: bursts coalesce).',
    registers: [registry],
  });
  const lag = new Gauge({
    name: 'clusterdns_recordbuilder_event_lag_seconds',
    help: 'Age of the oldest change read from the API and not yet in the answers; 0 when caught up.',
    registers: [registry],
  });
  const workerHeapTotal = new Gauge({
    name: 'clusterdns_recordbuilder_api_worker_heap_size_total_bytes',
    help: "The API worker thread's V8 heap (nodejs_heap_size_total_bytes is the answering thread's).",
    registers: [registry],
  });
  const workerHeapUsed = new Gauge({
    name: 'clusterdns_recordbuilder_api_worker_heap_size_used_bytes',
    help: "Bytes in use in the API worker thread's V8 heap, as of its last report (every 2 s).",
    registers: [registry],
  });
  const coalesced = new Counter({
    name: 'clusterdns_recordbuilder_events_coalesced_total',
    help: 'Watch events replaced by a later state of the same object before they were applied.',
    registers: [registry],
  });
  const eventDelay = new Histogram({
    name: 'clusterdns_recordbuilder_event_delay_seconds',
    help: 'From reading an object off the watch to its state being in the answers.',
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [registry],
  });
  const programming = new ProgrammingLatency();
  registerProgrammingLatency(registry, programming);
  const watchErrors = new Counter({
    name: 'clusterdns_recordbuilder_watch_errors_total',
    help: 'List or watch failures, by resource. The last known state keeps being served.',
    labelNames: ['resource'],
    registers: [registry],
  });
  const relists = new Counter({
    name: 'clusterdns_recordbuilder_relists_total',
    help: 'Full lists of a resource, by reason: start, expired (410 Gone) or error (a watch that could not resume).',
    labelNames: ['resource', 'reason'],
    registers: [registry],
  });
  const lastSync = new Gauge({
    name: 'clusterdns_recordbuilder_last_sync_timestamp_seconds',
    help: 'Unix time a watch of the resource last opened (after a list, or resumed), by resource.',
    labelNames: ['resource'],
    registers: [registry],
  });
  const watchHealthy = new Gauge({
    name: 'clusterdns_recordbuilder_watch_healthy',
    help: '1 while the watch of a resource is running, 0 while it is failing (answers come from the last known state).',
    labelNames: ['resource'],
    registers: [registry],
  });
  // While a watch fails the answers may miss changes made since: how long, per resource.
  const failingSince = new Map<ResourceName, number>();
  new Gauge({
    name: 'clusterdns_recordbuilder_api_staleness_seconds',
    help: 'Seconds since the state of a resource was last known current: 0 while its watch runs, rising while the API is unreachable and the last known state is served.',
    labelNames: ['resource'],
    registers: [registry],
    collect() {
      const now = Date.now();
      for (const [resource, since] of failingSince) this.labels(resource).set(since > 0 ? (now - since) / 1000 : 0);
    },
  });
  const eventDuration = new Histogram({
    name: 'clusterdns_recordbuilder_event_apply_duration_seconds',
    help: 'Time to apply one watch event to the store, by resource.',
    labelNames: ['resource'],
    buckets: [0.00001, 0.000025, 0.00005, 0.0001, 0.0002, 0.0003, 0.0005, 0.00075, 0.001, 0.0025, 0.005, 0.01, 0.05],
    registers: [registry],
  });
  const ready = new Gauge({
    name: 'clusterdns_recordbuilder_ready',
    help: '1 once every resource has synced (or --initial-sync-timeout passed), else 0.',
    registers: [registry],
  });

  const notifiesSent = new Counter({
    name: 'clusterdns_recordbuilder_notifies_sent_total',
    help: 'DNS NOTIFY messages sent to a --notify target, by target and zone (retries included).',
    labelNames: ['target', 'zone'],
    registers: [registry],
  });
  const notifyFailures = new Counter({
    name: 'clusterdns_recordbuilder_notify_failures_total',
    help: 'NOTIFYs not answered in time or answered with an error, by target and zone; each is retried.',
    labelNames: ['target', 'zone'],
    registers: [registry],
  });
  const propagation = new Histogram({
    name: 'clusterdns_recordbuilder_notify_propagation_seconds',
    help: 'From a change applied here to the forwarder answering the NOTIFY that covers it, which it does after dropping the stale answers: change to fresh answers through the forwarder.',
    labelNames: ['target'],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [registry],
  });
  const transfers = new Counter({
    name: 'clusterdns_recordbuilder_zone_transfers_total',
    help: 'Zone transfers served, by type (axfr, ixfr) and result (incremental, full: the journal did not reach back, current: up to date).',
    labelNames: ['type', 'result'],
    registers: [registry],
  });
  const positions = new Counter({
    name: 'clusterdns_recordbuilder_ixfr_positions_total',
    help: 'IXFRs asked from a copy another replica (or an earlier process) made, answered from its position on the cluster’s clock, by result (incremental, full: the journal could not place it, current). Moves during a rollout, drain or restart.',
    labelNames: ['result'],
    registers: [registry],
  });
  const journalBytes = new Gauge({
    name: 'clusterdns_recordbuilder_journal_bytes',
    help: 'Memory the IXFR change journal holds (bounded by --ixfr-journal-mib).',
    registers: [registry],
  });
  const journalChanges = new Gauge({
    name: 'clusterdns_recordbuilder_journal_changes',
    help: 'Changes the IXFR journal holds.',
    registers: [registry],
  });

  // Node caches found in the API (--node-cache-selector), and this replica's share of them.
  const nodeCaches = new Gauge({
    name: 'clusterdns_recordbuilder_node_caches',
    help: 'Node caches by which: known (ready pods of the node-local DaemonSet), owned (the ones this replica pushes to).',
    labelNames: ['which'],
    registers: [registry],
  });
  const nodeCacheReplicas = new Gauge({
    name: 'clusterdns_recordbuilder_node_cache_replicas',
    help: 'Replicas the node caches are shared between (ready endpoints of --dns-service); 0 when this replica pushes to all.',
    registers: [registry],
  });

  let coalescedSeen = 0;

  /** Every per-query series, for one query: its reply (undefined when none was sent) and rcode. */
  const countQuery = (
    qtype: number,
    system: ZoneSystem,
    reply: Buffer | undefined,
    rcode: number,
    tcp: boolean,
    seconds: number,
  ): void => {
    // Series keyed by small numbers: a query makes no string and hashes none.
    // bump/record first: the labels' closure is made only for a series' first query.
    const sys = system === 'auth' ? 0 : 1;
    if (!requestCount.bump(sys)) requestCount.inc(sys, () => ({ system }));
    if (!requestDuration.record(sys, seconds)) requestDuration.observe(sys, () => ({ system }), seconds);
    const size = reply?.length ?? 0;
    if (!responseSize.record(sys, size)) responseSize.observe(sys, () => ({ system }), size);
    const truncated = reply !== undefined && (u16(reply, 2) & FLAG.TC) !== 0;
    const cause = truncated ? 'truncated' : ERROR_CAUSES[rcode];
    const errorKey = sys * 32 + (truncated ? 16 : rcode);
    if (cause && !errorCount.bump(errorKey)) errorCount.inc(errorKey, () => ({ system, cause }));
    const type = typeIndexOf(qtype, typeLabel);
    const key = (type * 16 + rcode) * 2 + (tcp ? 1 : 0);
    if (!requests.bump(key))
      requests.inc(key, () => ({
        qtype: typeLabel(qtype),
        rcode: rcodeLabel(rcode),
        transport: tcp ? 'tcp' : 'udp',
      }));
  };

  return {
    /** One message through the pipeline; `system` is kube-dns's split: auth (the zone) or reverse. */
    observeQuery(outcome: QueryOutcome, system: ZoneSystem): void {
      const { query, reply, rejected } = outcome;
      if (rejected === 'short' || rejected === 'response' || rejected === 'malformed' || rejected === 'meta-type') {
        malformed.labels(rejected === 'short' || rejected === 'response' ? 'dropped' : 'formerr').inc();
      }
      if (!query) return;
      // A zone transfer is sent lazily, after this: no first message to read, and not a failure.
      const lazy = query.qtype === QTYPE.AXFR || query.qtype === QTYPE.IXFR;
      const rcode = reply ? u16(reply, 2) & RCODE_MASK : lazy && !rejected ? RCODE.NOERROR : RCODE.SERVFAIL;
      countQuery(query.qtype, system, reply, rcode, outcome.context.transport === 'tcp', outcome.seconds);
    },
    /** A query answered at once over UDP, before the pipeline (the express lane, hit-lane.ts). */
    countAnswered(qtype: number, system: ZoneSystem, reply: Buffer): void {
      countQuery(qtype, system, reply, u16(reply, 2) & RCODE_MASK, false, 0);
    },
    store(stats: {
      endpoints: number;
      services: number;
      cacheEntries: number;
      cacheBytes: number;
      backlog: number;
      lagSeconds: number;
      coalesced: number;
      workerHeap: { heapUsed: number; heapTotal: number };
    }): void {
      endpoints.set(stats.endpoints);
      services.set(stats.services);
      cacheEntries.set(stats.cacheEntries);
      cacheBytes.set(stats.cacheBytes);
      backlog.set(stats.backlog);
      lag.set(stats.lagSeconds);
      workerHeapTotal.set(stats.workerHeap.heapTotal);
      workerHeapUsed.set(stats.workerHeap.heapUsed);
      // The worker counts in total (and from 0 again after a restart); the counter follows it.
      if (stats.coalesced > coalescedSeen) coalesced.inc(stats.coalesced - coalescedSeen);
      coalescedSeen = stats.coalesced;
    },
    programmed(change: ProgrammedChange): void {
      programming.observe(change.kind, change.triggerMs, Date.now());
    },
    watchError(resource: ResourceName): void {
      watchErrors.labels(resource).inc();
      watchHealthy.labels(resource).set(0);
      if (!failingSince.get(resource)) failingSince.set(resource, Date.now());
    },
    relisted(resource: ResourceName, reason: string): void {
      relists.labels(resource, reason).inc();
    },
    watching(resource: ResourceName, nowMs: number): void {
      lastSync.labels(resource).set(nowMs / 1000);
      watchHealthy.labels(resource).set(1);
      failingSince.set(resource, 0);
    },
    eventApplied(resource: ResourceName, durationNs: bigint, delayMs: number): void {
      eventDuration.labels(resource).observe(Number(durationNs) / 1e9);
      eventDelay.observe(delayMs / 1000);
    },
    ready(isReady: boolean): void {
      ready.set(isReady ? 1 : 0);
    },
    notifySent(target: string, zone: string): void {
      notifiesSent.labels(target, zone).inc();
    },
    notifyFailed(target: string, zone: string): void {
      notifyFailures.labels(target, zone).inc();
    },
    notifyAcked(target: string, seconds: number): void {
      propagation.labels(target).observe(seconds);
    },
    transferred(type: 'axfr' | 'ixfr', result: 'incremental' | 'full' | 'current', foreign = false): void {
      transfers.labels(type, result).inc();
      if (foreign) positions.labels(result).inc();
    },
    journal(stats: { bytes: number; changes: number }): void {
      journalBytes.set(stats.bytes);
      journalChanges.set(stats.changes);
    },
    /** The DNS listener whose TCP backpressure /metrics shows. */
    tcpFrom(dns: Pick<DnsListener, 'tcpStalls' | 'tcpUnsentBytes'>): void {
      listener = dns;
    },
    nodeCaches(counts: { known: number; owned: number; replicas: number }): void {
      nodeCaches.labels({ which: 'known' }).set(counts.known);
      nodeCaches.labels({ which: 'owned' }).set(counts.owned);
      nodeCacheReplicas.set(counts.replicas);
    },
  };
}

export type RecordBuilderMetrics = ReturnType<typeof createRecordBuilderMetrics>;
