import {
  collectProcessMetrics,
  counterFrom,
  gaugeFrom,
  type HistogramStore,
  type LabelledCounts,
  labelledFrom,
  registerHistogram,
  registerProgrammingLatency,
} from '@cluster-dns/runtime';
import type { DnsListener, TcpRefusals, TcpStalls } from '@cluster-dns/wire';
import type { Registry } from 'prom-client';
import type { ClientDoor } from '../isolation/client-door.js';
import type { AclCounts, AclStage } from '../plugins/acl/acl-stage.js';
import type { AutopathCounts } from '../plugins/autopath/autopath-stage.js';
import type { AnswerCache } from '../plugins/cache/cache.js';
import type { CacheStage } from '../plugins/cache/cache-stage.js';
import { registerDns64Metrics } from '../plugins/dns64/dns64-metrics.js';
import type { ForwardStage } from '../plugins/forward/forward-stage.js';
import type { RouteBudget } from '../plugins/forward/route-budget.js';
import type { UpstreamStats } from '../plugins/forward/upstream-stats.js';
import type { NotifyStage } from '../plugins/notify/notify-stage.js';
import type { ZoneSync } from '../plugins/notify/zone-sync.js';
import { registerRewriteMetrics } from '../plugins/rewrite/rewrite-metrics.js';
import type { SubdomainGuardStage } from '../plugins/subdomain-guard/subdomain-guard-stage.js';
import { registerTemplateMetrics } from '../plugins/template/template-metrics.js';
import type { TemplateCounts } from '../plugins/template/template-stage.js';
import type { TransferRelayStage } from '../plugins/transfer/transfer-relay-stage.js';
import type { ServerQueryCounts } from './query-counts.js';

/** What the metrics read at scrape time: each stage's own counters, nothing pushed per query. */
export interface ForwarderMetricSources {
  /** The process_* and nodejs_* series; off in a worker thread, whose main thread exports them once. */
  processMetrics: boolean;
  /** This worker's index (--workers), for the one series kept per worker. */
  worker?: string;
  /** CoreDNS's `server` label: `dns://<address>:<port>`, known once listening. */
  server(): string;
  /** The cache whose own series (entries, evictions) this registry reports: its own, or the pool's shared store. */
  cache: AnswerCache;
  cacheStage: CacheStage;
  forward: ForwardStage;
  budget: RouteBudget;
  /** Per-client limits and response rate limiting (isolation/client-door.ts). */
  door: ClientDoor;
  guard: SubdomainGuardStage;
  /** UDP queries dropped unread because the socket was behind (--shed-after), over every listener. */
  shed(): number;
  upstreams: UpstreamStats;
  notify: NotifyStage;
  relay: TransferRelayStage;
  zones: ZoneSync;
  /** Upstreams disabled because they loop back to us. */
  loopDisabled(): number;
  /** Config reloads refused (invalid or unreadable ConfigMap or resolv file). */
  reloadFailures(): number;
  /** The per-query server series, counted by the pipeline's observe hook and the express lane. */
  queries: ServerQueryCounts;
  /**
   * Client TCP connections open now, those closed at once at a cap, those closed because their
   * client stopped reading, and the reply octets waiting for clients to read them, over every listener.
   */
  tcp(): { open: number; refused: TcpRefusals; stalls: TcpStalls; unsentBytes: number };
  /** Kept TCP connections to upstreams (`force_tcp` routes): open now, and opened in all. */
  upstreamTcp(): { open: number; opened: number };
  /** Server-side search's counts (--autopath); undefined when it is off. */
  autopath?: AutopathCounts;
  /** A Corefile acl's decisions. */
  acl: AclCounts;
  /** The acl stage, for what it refuses of the client map. */
  aclStage: Pick<AclStage, 'clientMapRefused'>;
  /** The plugins that count for series of their own (each plugin's room registers them). */
  template: TemplateCounts;
  dns64: { translated: number };
  rewrite: { rewritten: number; invalid: number };
}

/**
 * The forwarder's own metrics (its `/metrics`), on the registry given. CoreDNS's names and labels
 * where the concept is the same (its dashboards and mixin alerts work unchanged): one server block,
 * zone ".". Counters live in the stages that count them and are read at scrape time, so the query
 * path pays nothing for them; the per-query series below are plain counts too.
 */
export function createForwarderMetrics(registry: Registry, sources: ForwarderMetricSources) {
  if (sources.processMetrics) collectProcessMetrics(registry);
  const { cache, cacheStage, forward, upstreams, notify, zones, guard } = sources;
  createListenerMetrics(registry, { ...sources, hits: () => cacheStage.counts });
  const server = () => ({ server: sources.server() });
  registerTemplateMetrics(registry, sources.template, sources.server);
  registerDns64Metrics(registry, sources.dns64, sources.server);
  registerRewriteMetrics(registry, sources.rewrite);

  counterFrom(
    registry,
    'clusterdns_forwarder_cache_misses_total',
    'Queries not answered from the cache.',
    () => cacheStage.counts.misses,
  );
  counterFrom(
    registry,
    'clusterdns_forwarder_stale_answers_total',
    'Expired answers served because every server of the route failed (RFC 8767 serve-stale).',
    () => cacheStage.counts.staleServed,
  );
  counterFrom(
    registry,
    'clusterdns_forwarder_prefetches_total',
    'Popular entries refreshed in the background before they expired.',
    () => cacheStage.counts.prefetches,
  );
  counterFrom(
    registry,
    'clusterdns_forwarder_coalesced_queries_total',
    'Queries that joined an identical question already in flight upstream instead of asking again.',
    () => cacheStage.counts.coalesced,
  );
  // CoreDNS's reload plugin's name, so its alert (a bad Corefile push) fires on a bad ConfigMap.
  counterFrom(
    registry,
    'coredns_reload_failed_total',
    'Config reloads refused: an invalid or unreadable ConfigMap or resolv file (the last good config stays).',
    () => sources.reloadFailures(),
    // Every worker reads the same files: one bad ConfigMap is one failure, not one per worker.
    'max',
  );
  labelledFrom(
    registry,
    'clusterdns_forwarder_rejected_replies_total',
    'Upstream replies dropped because they do not answer a query of ours, by reason: source, id, question, not-a-response, case (0x20 not echoed).',
    ['reason'],
    () => [...upstreams.rejectedByReason].map(([reason, n]) => [{ reason }, n]),
  );
  labelledFrom(
    registry,
    'clusterdns_forwarder_notifies_received_total',
    'DNS NOTIFY messages received, by result: accepted (from a server of the zone’s route) or refused (from anyone else).',
    ['result'],
    () => [
      [{ result: 'accepted' }, notify.counts.accepted],
      [{ result: 'refused' }, notify.counts.refused],
    ],
  );
  labelledFrom(
    registry,
    'clusterdns_forwarder_zone_transfers_total',
    'IXFRs fetched after a NOTIFY or SOA check, by result: incremental, full (the zone was flushed), up-to-date, failed.',
    ['result'],
    () => [...zones.counts.transfers].map(([result, n]) => [{ result }, n]),
  );
  labelledFrom(
    registry,
    'clusterdns_forwarder_notify_changes_total',
    'NOTIFYs that carried the names changed (node caches), by result: applied (dropped, no fetch), gap (not in step with the last: fetched), incomplete (too many names: fetched).',
    ['result'],
    () => [...zones.counts.carried].map(([result, n]) => [{ result }, n]),
  );
  registerProgrammingLatency(registry, zones.counts.programming);
  counterFrom(
    registry,
    'clusterdns_forwarder_cache_invalidated_total',
    'Cache entries dropped because a pushed zone changed a name in them.',
    () => zones.counts.invalidated,
  );
  gaugeFrom(
    registry,
    'clusterdns_forwarder_zone_serial',
    'SOA serial held for each pushed zone (its answers are invalidated on change).',
    ['zone'],
    () =>
      zones
        .zones()
        .filter((z) => z.serial !== undefined)
        .map((z) => [{ zone: z.zone }, z.serial as number]),
    // Every worker holds the same serial.
    'max',
  );
  labelledFrom(registry, 'coredns_cache_misses_total', 'Cache misses.', ['server'], () => [
    [server(), cacheStage.counts.misses],
  ]);
  // What the cache counts of itself: its entries and the live ones pushed out.
  gaugeFrom(
    registry,
    'clusterdns_forwarder_cache_entries',
    'Entries in the cache (stale ones kept for serve-stale included).',
    [],
    () => [[{}, cache.size]],
  );
  labelledFrom(
    registry,
    'coredns_cache_evictions_total',
    'Live cache entries pushed out to make room, by type.',
    ['server', 'type'],
    () => [
      [{ ...server(), type: 'success' }, cache.counts.evictions - cache.counts.denialEvictions],
      [{ ...server(), type: 'denial' }, cache.counts.denialEvictions],
    ],
  );
  gaugeFrom(
    registry,
    'coredns_cache_entries',
    'Entries in the cache, by type: success or denial.',
    ['server', 'type'],
    () => [
      [{ ...server(), type: 'denial' }, cache.denialEntries],
      [{ ...server(), type: 'success' }, cache.size - cache.denialEntries],
    ],
  );
  counterFrom(
    registry,
    'coredns_forward_max_concurrent_rejects_total',
    'Queries refused because their route had --dns-forward-max questions in flight upstream.',
    () => forward.maxConcurrentRejects,
  );
  gaugeFrom(
    registry,
    'clusterdns_forwarder_upstream_in_flight',
    'Distinct questions in flight upstream now, over every route.',
    [],
    () => [[{}, forward.inFlight()]],
  );
  const { budget } = sources;
  gaugeFrom(
    registry,
    'clusterdns_forwarder_route_in_flight',
    'Questions in flight upstream now, by route (its domain; . for the default upstreams): at most --dns-forward-max each.',
    ['route'],
    () => budget.inFlightByRoute().map(([route, n]) => [{ route }, n]),
  );
  labelledFrom(
    registry,
    'clusterdns_forwarder_route_refused_total',
    'Queries refused because their route’s share of questions in flight was full, by route.',
    ['route'],
    () => [...budget.counts.refused].map(([route, n]) => [{ route }, n]),
  );
  labelledFrom(
    registry,
    'clusterdns_forwarder_route_jostled_total',
    'Questions given up (SERVFAIL) to make room for newer ones in their route’s full share, by route (--jostle-timeout).',
    ['route'],
    () => [...budget.counts.jostled].map(([route, n]) => [{ route }, n]),
  );
  counterFrom(
    registry,
    'clusterdns_forwarder_client_map_refused_total',
    'Questions for the client map (which namespace each pod address is in) refused to a client that is neither this host nor a node cache of --trust-client-address-from.',
    () => sources.aclStage.clientMapRefused,
  );
  labelledFrom(
    registry,
    'clusterdns_forwarder_acl_total',
    'Queries a Corefile acl decided, by action: allow, block (REFUSED), filter (an empty NOERROR), drop (no reply). Queries under no acl are not counted.',
    ['action'],
    () => (['allow', 'block', 'filter', 'drop'] as const).map((action) => [{ action }, sources.acl[action]]),
  );
  const { autopath } = sources;
  if (autopath)
    labelledFrom(
      registry,
      'clusterdns_forwarder_autopath_total',
      'First steps of a pod’s search walk (<name>.<ns>.svc.<zone>) seen with --autopath, by result: walked (the asker’s search path is the default: walked here), found (of those, answered with a CNAME to a later step’s name), kept (of those found, answered from a walk kept for the asker’s namespace, no step asked), skipped (an unknown asker, another namespace, or a search path of its own: passed on).',
      ['result'],
      () => [
        [{ result: 'walked' }, autopath.walked],
        [{ result: 'found' }, autopath.found],
        [{ result: 'kept' }, autopath.kept],
        [{ result: 'skipped' }, autopath.skipped],
      ],
    );
  counterFrom(
    registry,
    'clusterdns_forwarder_subdomain_guard_trips_total',
    'Times a domain’s distinct-name misses with a failing upstream tripped the random-subdomain guard.',
    () => guard.counts.trips,
  );
  counterFrom(
    registry,
    'clusterdns_forwarder_subdomain_guard_answered_total',
    'Queries for new names under a tripped domain answered SERVFAIL without asking upstream.',
    () => guard.counts.answered,
  );
  gaugeFrom(
    registry,
    'clusterdns_forwarder_subdomain_guard_domains',
    'Domains whose new names get SERVFAIL without being asked now (the random-subdomain guard).',
    [],
    () => [[{}, guard.heldParents()]],
    // Every worker holds a domain another tripped on.
    'max',
  );
  // Our side of the same: a node cache's kept connections to the cluster's DNS. Opened growing
  // with the queries, not staying near the open count, means connections are not being kept.
  gaugeFrom(
    registry,
    'clusterdns_forwarder_upstream_tcp_connections',
    'Kept TCP connections to upstreams (force_tcp routes) open now.',
    [],
    () => [[{}, sources.upstreamTcp().open]],
  );
  counterFrom(
    registry,
    'clusterdns_forwarder_upstream_tcp_connections_opened_total',
    'Kept TCP connections to upstreams opened (force_tcp routes).',
    () => sources.upstreamTcp().opened,
  );
  labelledFrom(
    registry,
    'clusterdns_forwarder_transfers_relayed_total',
    'Zone transfers relayed for node caches (--transfer-relay-from), by result: relayed, refused, failed.',
    ['result'],
    () => Object.entries(sources.relay.counts).map(([result, n]): [Record<string, string>, number] => [{ result }, n]),
  );
  gaugeFrom(
    registry,
    'clusterdns_forwarder_upstreams_loop_disabled',
    'Upstreams disabled because they send our queries back to us (--dns-loop-detect).',
    [],
    () => [[{}, sources.loopDisabled()]],
    'max',
  );
  labelledFrom(registry, 'coredns_forward_requests_total', 'Queries sent to each upstream (every try).', ['to'], () =>
    upstreams.requests.entries(),
  );
  labelledFrom(
    registry,
    'coredns_forward_responses_total',
    'Replies from each upstream, by rcode.',
    ['to', 'rcode'],
    () => upstreams.responses.entries(),
  );
  registerHistogram(
    registry,
    'coredns_forward_request_duration_seconds',
    'Round-trip time of each upstream try that got a reply, by rcode.',
    upstreams.durations,
  );
  labelledFrom(
    registry,
    'coredns_forward_healthcheck_failures_total',
    'Upstream tries that got no reply (timeout or error); the next server of the route is tried.',
    ['to'],
    () => upstreams.failures.entries(),
  );
  gaugeFrom(
    registry,
    'clusterdns_forwarder_upstream_healthy',
    '1 when the last try of the upstream got a reply (any rcode), 0 when it got none.',
    ['to'],
    () => [...upstreams.lastAnswered].map(([to, answered]) => [{ to }, answered ? 1 : 0]),
    // 1 while any worker's last try got a reply.
    'max',
  );
}

/** What each listener's side counts: a forwarder's, or a lane's of a pool (workers/lane.ts). */
export interface ListenerMetricSources {
  /** This worker's index (--workers), for the one series kept per worker. */
  worker?: string;
  server(): string;
  /** Cache hits answered here (the express lane's, and the chain's in a forwarder). */
  hits(): { readonly hits: number; readonly denialHits: number };
  door: Pick<ClientDoor, 'counts' | 'trackedClients'>;
  shed(): number;
  queries: {
    readonly requests: Pick<LabelledCounts, 'entries'>;
    readonly responses: Pick<LabelledCounts, 'entries'>;
    readonly duration: HistogramStore;
  };
  tcp(): ListenerTcpCounts;
}

/** Client TCP connections: open now, closed at a cap, closed stalled, and replies waiting unread. */
export interface ListenerTcpCounts {
  open: number;
  refused: TcpRefusals;
  stalls: TcpStalls;
  unsentBytes: number;
}

/**
 * The series counted where queries arrive: requests and responses, cache hits, the door's
 * refusals, client TCP connections. A forwarder reports its own; each lane of a pool of workers
 * reports its own, and the pool's /metrics sums them with the main forwarder's.
 */
export function createListenerMetrics(registry: Registry, sources: ListenerMetricSources): void {
  const { door } = sources;
  const server = () => ({ server: sources.server() });
  counterFrom(
    registry,
    'clusterdns_forwarder_cache_hits_total',
    'Queries answered from the cache.',
    () => sources.hits().hits,
  );
  labelledFrom(
    registry,
    'coredns_cache_hits_total',
    'Cache hits, by type: success or denial (NXDOMAIN, NODATA).',
    ['server', 'type'],
    () => [
      [{ ...server(), type: 'success' }, sources.hits().hits - sources.hits().denialHits],
      [{ ...server(), type: 'denial' }, sources.hits().denialHits],
    ],
  );
  // Isolation: what was done instead of serving a client, by reason.
  labelledFrom(
    registry,
    'clusterdns_forwarder_limited_total',
    'Queries and answers not served as asked to keep one client from taking DNS from the others, by reason: client_refused, client_truncated and client_dropped (--client-qps, --client-tcp-qps), rrl_dropped and rrl_truncated (--rrl-responses-per-second), shed (--shed-after).',
    ['reason'],
    () => [
      [{ reason: 'client_refused' }, door.counts.clientRefused],
      [{ reason: 'client_truncated' }, door.counts.clientTruncated],
      [{ reason: 'client_dropped' }, door.counts.clientDropped],
      [{ reason: 'rrl_dropped' }, door.counts.rrlDropped],
      [{ reason: 'rrl_truncated' }, door.counts.rrlTruncated],
      [{ reason: 'shed' }, sources.shed()],
    ],
  );
  labelledFrom(
    registry,
    'clusterdns_forwarder_client_identity_total',
    'Queries naming the pod they ask for (a node cache’s EDNS0 option), by result: carried (from an address of --trust-client-address-from: its limits count that pod), forged (from any other: ignored). Seen where per-client limits are on.',
    ['result'],
    () => [
      [{ result: 'carried' }, door.counts.identityCarried],
      [{ result: 'forged' }, door.counts.identityForged],
    ],
  );
  gaugeFrom(
    registry,
    'clusterdns_forwarder_limited_clients',
    'Client addresses with a rate-limit bucket now (at most 65,536 per transport).',
    [],
    () => [[{}, door.trackedClients()]],
  );
  // Node caches (NodeLocal DNSCache's force_tcp) hold TCP connections for long: how many, and
  // whether the caps (--max-tcp-connections, --max-tcp-connections-per-client) turn clients away.
  gaugeFrom(registry, 'clusterdns_forwarder_tcp_connections', 'Client TCP connections open now.', [], () => [
    [{}, sources.tcp().open],
  ]);
  labelledFrom(
    registry,
    'clusterdns_forwarder_tcp_connections_refused_total',
    'Client TCP connections closed at once at a cap: limit (--max-tcp-connections) or per_client.',
    ['reason'],
    () => {
      const { refused } = sources.tcp();
      return [
        [{ reason: 'limit' }, refused.limit],
        [{ reason: 'per_client' }, refused.perClient],
      ];
    },
  );
  labelledFrom(
    registry,
    'clusterdns_forwarder_tcp_stalled_closed_total',
    'Client TCP connections closed because the client stopped reading its replies: timeout (--tcp-write-timeout) or budget (--max-tcp-unsent-total-bytes).',
    ['reason'],
    () => {
      const { stalls } = sources.tcp();
      return [
        [{ reason: 'timeout' }, stalls.timeout],
        [{ reason: 'budget' }, stalls.budget],
      ];
    },
  );
  gaugeFrom(
    registry,
    'clusterdns_forwarder_tcp_unsent_bytes',
    'Reply octets waiting in client TCP connections for their clients to read them (at most --max-tcp-unsent-total-bytes, give or take a sweep).',
    [],
    () => [[{}, sources.tcp().unsentBytes]],
  );
  // How evenly the kernel spreads clients over the workers' sockets (SO_REUSEPORT hashes each
  // client's address and port): the one series that is not summed over workers.
  if (sources.worker !== undefined) {
    const worker = sources.worker;
    labelledFrom(
      registry,
      'clusterdns_forwarder_worker_queries_total',
      'Queries each worker answered or dropped (--workers).',
      ['worker'],
      () => {
        let n = 0;
        for (const [, count] of sources.queries.requests.entries()) n += count;
        return [[{ worker }, n]];
      },
    );
  }

  // The server-level series: plain counts (query-counts.ts), from the pipeline and the express lane.
  const { requests, responses, duration } = sources.queries;
  labelledFrom(
    registry,
    'coredns_dns_requests_total',
    'DNS requests, by transport (proto), address family (1: IPv4, 2: IPv6) and query type.',
    ['server', 'zone', 'proto', 'family', 'type'],
    () => requests.entries(),
  );
  labelledFrom(
    registry,
    'coredns_dns_responses_total',
    'DNS responses, by rcode.',
    ['server', 'zone', 'rcode', 'plugin'],
    () => responses.entries(),
  );
  registerHistogram(
    registry,
    'coredns_dns_request_duration_seconds',
    'Time from a query arriving to its reply, by query type.',
    duration,
  );
}

/** CoreDNS's `server` label of a forwarder's series: `dns://<first listen address>:<port>`. */
export function serverLabelOf(addresses: readonly string[], port: number): string {
  return `dns://${addresses[0] ?? ''}:${port}`;
}

/** UDP queries dropped unread (--shed-after) over a set of listeners (a forwarder's, or a lane's). */
export function shedOf(listeners: readonly DnsListener[]): number {
  return listeners.reduce((n, l) => n + l.udpShed(), 0);
}

/** Client TCP counts over a set of listeners (a forwarder's, or a lane's). */
export function tcpCountsOf(listeners: readonly DnsListener[]): ListenerTcpCounts {
  const refused = { limit: 0, perClient: 0 };
  const stalls = { timeout: 0, budget: 0 };
  let open = 0;
  let unsentBytes = 0;
  for (const listener of listeners) {
    open += listener.tcpConnections();
    unsentBytes += listener.tcpUnsentBytes();
    const { limit, perClient } = listener.tcpRefused();
    refused.limit += limit;
    refused.perClient += perClient;
    stalls.timeout += listener.tcpStalls().timeout;
    stalls.budget += listener.tcpStalls().budget;
  }
  return { open, refused, stalls, unsentBytes };
}
