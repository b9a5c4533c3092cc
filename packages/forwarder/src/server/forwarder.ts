import { Buffer } from 'node:buffer';
import { hostname } from 'node:os';
import { performance } from 'node:perf_hooks';
import { type ClientLimits, FlagError, type Logger, ServerCore, sleep } from '@cluster-dns/runtime';
import {
  buildBareResponse,
  buildQueryMessage,
  chainStages,
  cidrContains,
  createQueryPipeline,
  createUpstreamTcp,
  createUpstreamUdp,
  type DnsListener,
  decodeMessage,
  encodeMessage,
  type Fqdn,
  type Next,
  OPCODE,
  type PlainQuestion,
  parseQuery,
  QCLASS,
  QTYPE,
  type RawHandler,
  RCODE,
  type Rejection,
  ROOT,
  withoutIpv4Mapping,
} from '@cluster-dns/wire';
import { Registry } from 'prom-client';
import { type Configured, createConfigReloader } from '../config/config-reloader.js';
import { type RawConfig, readConfigSources } from '../config/config-source.js';
import { type ForwarderRequest, ownRequest } from '../config/forwarder-request.js';
import { serverText } from '../config/route-table.js';
import { ClientDoor } from '../isolation/client-door.js';
import { ClientTally } from '../isolation/client-tally.js';
import { clusterZoneOf, type ForwarderOptions, listenerSettingsOf } from '../options.js';
import { AclStage, type ScopedAcl } from '../plugins/acl/acl-stage.js';
import { AnyStage } from '../plugins/any/any-stage.js';
import { AutopathStage } from '../plugins/autopath/autopath-stage.js';
import { clientEntryOf, clientMapName } from '../plugins/autopath/client-map.js';
import { KeptWalks } from '../plugins/autopath/kept-walks.js';
import { chainFirst } from '../plugins/autopath/search-path.js';
import { BufsizeStage } from '../plugins/bufsize/bufsize-stage.js';
import { type AnswerCache, monotonicMs, ReplyCache } from '../plugins/cache/cache.js';
import { CacheStage, type CacheStageCounts } from '../plugins/cache/cache-stage.js';
import { ChaosStage } from '../plugins/chaos/chaos-stage.js';
import type { StatsSnapshot } from '../plugins/chaos/chaos-stats.js';
import { Dns64Stage } from '../plugins/dns64/dns64-stage.js';
import { ErrorsStage } from '../plugins/errors/errors-stage.js';
import { FileStage } from '../plugins/file/file-stage.js';
import { ForwardStage } from '../plugins/forward/forward-stage.js';
import { healthProbe } from '../plugins/forward/health-probe.js';
import { RouteBudget } from '../plugins/forward/route-budget.js';
import { ServerHealth } from '../plugins/forward/server-health.js';
import { TlsUpstreams } from '../plugins/forward/tls-upstreams.js';
import { UpstreamStats } from '../plugins/forward/upstream-stats.js';
import { HostsStage } from '../plugins/hosts/hosts-stage.js';
import { LogStage } from '../plugins/log/log-stage.js';
import { createLoopDetector } from '../plugins/loop/loop-detect.js';
import { LoopGuardStage } from '../plugins/loop/loop-guard-stage.js';
import { NotifyStage } from '../plugins/notify/notify-stage.js';
import { createZoneTransfers } from '../plugins/notify/zone-transfers.js';
import { RewriteStage } from '../plugins/rewrite/rewrite-stage.js';
import { SubdomainGuardStage } from '../plugins/subdomain-guard/subdomain-guard-stage.js';
import { TemplateStage } from '../plugins/template/template-stage.js';
import { TransferRelayStage } from '../plugins/transfer/transfer-relay-stage.js';
import { WhoamiStage } from '../plugins/whoami/whoami-stage.js';
import { type BlockPlugins, NO_BLOCK_PLUGINS } from './block-plugins.js';
import { createHitLane } from './hit-lane.js';
import { laneBypassOf } from './lane-bypass.js';
import { createForwarderMetrics, serverLabelOf, shedOf, tcpCountsOf } from './metrics.js';
import { NamespaceTally, namespaceQueriesMetric } from './namespace-tally.js';
import { ServerQueryCounts } from './query-counts.js';
import { createSelfCheck } from './self-address.js';
import type { Serving } from './serving.js';

export { VERSION } from '../plugins/chaos/chaos-stage.js';

import { VERSION } from '../plugins/chaos/chaos-stage.js';

export interface ForwarderDeps {
  log: Logger;
  now?: () => number;
  /**
   * Routes from config files of another shape than kube-dns's (node-local mode's Corefile): the
   * files are read with the ConfigMap on each poll, and `routesFrom` turns what was read into routes;
   * `defaultsFrom`, the routes to run on while no valid config has been seen.
   */
  config?: {
    files: readonly string[];
    /** What else the config's version depends on, given the files read (a Corefile's imports). */
    versionOf?(files: ReadonlyMap<string, string>): string;
    routesFrom(raw: RawConfig): Configured<BlockPlugins>;
    defaultsFrom?(raw: RawConfig): Configured<BlockPlugins>;
  };
  /**
   * Worker 0 of a pool (--workers, worker-pool.ts): the lanes beside it answer hits from the same
   * cache and hand it the rest; /metrics is the pool's (this one's series labelled `worker`), its
   * CHAOS statistics add the lanes' hits, and new per-client limits go to the lanes too.
   */
  pooled?: {
    worker: string;
    laneHits(): number;
    onLimits(limits: ClientLimits): void;
    /** Told whether every query must take this chain (an `acl`): the lanes then answer no hit. */
    setChainOnly?(on: boolean): void;
  };
  /**
   * The cache, when not one of this forwarder's own (ReplyCache, bounded by entries): the process's
   * shared store (shared-cache/), which a pool's lanes read too.
   */
  sharedCache?: AnswerCache;
  /** hostname.bind's answer (the Pod's name); the host's name by default. */
  hostname?: string;
}

/** How deep the plugins' own lookups may go into the chain again (a template whose CNAME points at itself). */
const MAX_LOOKUP_DEPTH = 8;

export interface Forwarder extends Serving {
  /** Re-reads --config-dir and --resolv-file now (the poll does this on its own). */
  reloadConfig(): Promise<void>;
  /** The cache stage's counts: hits, misses, coalesced … */
  readonly counters: Readonly<CacheStageCounts>;
  /** Messages the query pipeline answered or dropped itself, by reason. */
  readonly rejected: Readonly<Partial<Record<Rejection, number>>>;
  /** Upstream replies dropped for a wrong source, ID or question. */
  rejectedReplies(): number;
  /** Probes every upstream for a forwarding loop now (start and config changes do it with --dns-loop-detect). */
  detectLoops(): Promise<void>;
  /** Upstreams disabled because they loop back to us. */
  disabledServers(): string[];
  /** Every metric as prom-client's JSON, for the main thread to sum over workers. */
  metricsJson(): ReturnType<Registry['getMetricsAsJSON']>;
  /** The query pipeline its listeners use: a pool's lanes hand it the queries they do not answer. */
  handle: RawHandler;
  /** Queries per client its door counted (--namespace-metrics), for a pool's per-namespace series. */
  clientTally(): { entries: Array<[string, number]>; overflow: number };
  /** The namespace of the pod at this address, from the client map through the cache. */
  clientNamespace(client: string): Promise<string | undefined>;
}

/**
 * The dnsmasq container: the chain notify → transfer relay → chaos → loop guard → cache → forward, behind the query
 * pipeline, on the listeners; the config reloader, zone sync and metrics beside it. This shell only
 * builds those and closes them in order; what a query gets is the stages' business. No I/O here.
 */
export function createForwarder(options: ForwarderOptions, deps: ForwarderDeps): Forwarder {
  const { log } = deps;
  const now = deps.now ?? monotonicMs;
  const registry = new Registry();
  // The forwarder has no readiness of its own: its lameduck is always waited out.
  const server = new ServerCore({ log, lameduckMs: options.lameduckMs, lameduck: 'always' });
  const { closers } = server;
  const listeners: DnsListener[] = [];
  const rejected: Partial<Record<Rejection, number>> = {};
  const boundPort = () => (options.port !== 0 ? options.port : (listeners[0]?.port ?? 0));
  const isSelf = createSelfCheck(options.listenAddresses, boundPort);
  const disabled = new Set<string>();
  const loops = createLoopDetector({ log, disabled });
  const cache = deps.sharedCache ?? new ReplyCache(options.cacheSize, now, options.maxStaleSeconds);
  const upstreams = new UpstreamStats((server, reason) =>
    log.warn('dropped a reply that does not match its query (possible spoofing)', { server, reason }),
  );
  const upstreamUdp = createUpstreamUdp({ keepLoopback: options.keptLoopbackSockets });
  // force_tcp routes (node-local mode): kept, pipelined connections, closed after 10 s idle as
  // CoreDNS's forward does, before the 30 s after which our own Pod side closes them.
  const upstreamTcp = createUpstreamTcp({ idleTimeoutMs: 10_000 });

  let aclsStand = false;
  /** What the express lane leaves to the chain for the plugins before the cache (lane-bypass.ts). */
  let pluginsFirst: ReturnType<typeof laneBypassOf>;
  const config = createConfigReloader<BlockPlugins>({
    noPlugins: NO_BLOCK_PLUGINS,
    read: () => readConfigSources(options.configDir, options.resolvFile, deps.config?.files, deps.config?.versionOf),
    rules: options.rules,
    ...(deps.config ? { routesFrom: deps.config.routesFrom } : {}),
    ...(deps.config?.defaultsFrom ? { defaultsFrom: deps.config.defaultsFrom } : {}),
    log,
    isSelf,
    // The ConfigMap's clientLimits over the flags', as each config is applied.
    onLimits: (overrides) => {
      const limits = { ...options.isolation.limits, ...overrides };
      door.setLimits(limits);
      deps.pooled?.onLimits(limits);
    },
    onApplied: (next, _previous, plugins) => {
      pluginsFirst = laneBypassOf(plugins);
      // An acl must see every query: no hit is answered before the chain while one stands.
      aclsStand = options.acl.length > 0 || plugins.acls.some((a) => a.rules.length > 0);
      // A pool's lanes know no config: any plugin before the cache that the lane must heed sends
      // every query of theirs to this chain (worker 0's lane checks each reply itself).
      deps.pooled?.setChainOnly?.(aclsStand || pluginsFirst !== undefined);
      // Cached answers of routes that did not change stay valid.
      const dropped = cache.dropStale((name) => next.routeFor(name).id);
      if (options.loopDetect && listeners.length > 0) void loops.check(next.servers());
      return { cacheEntriesDropped: dropped };
    },
  });
  const zoneSync = createZoneTransfers({
    routes: config.routes,
    cache,
    options,
    notifyFromAnySource: options.notifyListen !== undefined,
    upstreamTcp,
    log,
  });

  const { isolation } = options;
  const budget = new RouteBudget(options.forwardMax, isolation.jostleMs, () => performance.now());
  const tally = options.namespaceSeries > 0 ? new ClientTally() : undefined;
  const door = new ClientDoor(
    isolation.limits,
    options.ednsPacketMax,
    () => performance.now(),
    isolation.trustClientAddressFrom,
    tally,
  );
  const guard = new SubdomainGuardStage(isolation.guard, {
    routes: config.routes,
    log,
    now: () => performance.now(),
  });
  // A Corefile forward's tls:// servers, and its servers' health (max_fails, health_check).
  const tlsUpstreams = new TlsUpstreams();
  const health = new ServerHealth(healthProbe({ exchangeUdp: upstreamUdp.exchange, tls: tlsUpstreams }));
  const forward = new ForwardStage({
    routes: config.routes,
    budget,
    forward: {
      exchangeUdp: upstreamUdp.exchange,
      exchangeTcp: upstreamTcp.exchange,
      exchangeTlsFor: (upstream) => tlsUpstreams.exchangeFor(upstream),
      health,
      timeoutMs: options.upstreamTimeoutMs,
      deadlineMs: options.forwardDeadlineMs,
      stats: upstreams,
      disabled,
      randomCase: options.randomCase,
      now,
    },
    log,
    logQueries: options.logQueries,
  });
  const cacheStage = new CacheStage({
    cache,
    policy: options,
    push: zoneSync,
    staleAllowed: (kind) => options.maxStaleSeconds > 0 && (kind !== 'server' || options.staleServerRoutes),
    prefetchHits: options.prefetchHits,
    log,
    logQueries: options.logQueries,
    now,
  });
  const notify = new NotifyStage(zoneSync);
  const relay = new TransferRelayStage({
    routes: config.routes,
    allowed: (address) => options.transferRelayFrom.some((cidr) => cidrContains(cidr, address)),
    sync: zoneSync,
    timeoutMs: options.forwardDeadlineMs,
    log,
  });
  const stats = (): StatsSnapshot => ({
    cachesize: options.cacheSize,
    insertions: cache.counts.insertions,
    evictions: cache.counts.evictions,
    misses: cacheStage.counts.misses,
    // A pool's lanes answer hits too: they count them into shared memory.
    hits: cacheStage.counts.hits + (deps.pooled?.laneHits() ?? 0),
    auth: 0,
    servers: config
      .routes()
      .servers()
      .map((s) => {
        const c = upstreams.servers().get(serverText(s)) ?? { queries: 0, failures: 0 };
        return `${serverText(s)} ${c.queries} ${c.failures}`;
      }),
    version: VERSION,
  });
  const chaos = new ChaosStage({ stats, configs: () => config.plugins().chaos, hostname: deps.hostname ?? hostname() });
  const rewrite = new RewriteStage(() => config.plugins().rewrites);
  const hosts = new HostsStage(() => config.plugins().hosts);
  // Who asked: the sender, or the pod a trusted node cache names (acl and autopath judge that pod).
  const askerOf = (request: ForwarderRequest) => door.askerOf(request.query.raw, request.context.remoteAddress);
  const clusterZone = clusterZoneOf(options);
  // --acl's rules cover every name, ahead of a Corefile's blocks.
  const flagAcls: readonly ScopedAcl[] = options.acl.length
    ? [{ zones: [ROOT], rules: options.acl, blockZones: [ROOT], flags: true }]
    : [];
  const acl = new AclStage(
    () => [...flagAcls, ...config.plugins().acls],
    askerOf,
    clusterZone,
    (sender) => withoutIpv4Mapping(sender) === '127.0.0.1' || sender === '::1' || door.trusts(sender),
  );
  // Before the cache: each step of a walk is a question to the cache; the answer made is for one asker.
  const autopath = options.autopath
    ? new AutopathStage(
        options.autopath,
        (raw, address) => door.askerOf(raw, address),
        (name) => config.routes().routeFor(name).domain === options.autopath?.zone,
        // As many walks as the cache keeps answers: --cache-size=0 keeps none.
        new KeptWalks({ drops: () => cache.writeToken(), now, maxEntries: options.cacheSize }),
      )
    : undefined;
  // A name the plugins after the chain's top look up on their own (a template's or zone file's
  // CNAME target, dns64's A records) goes through the whole chain again, as CoreDNS's upstream.
  const lookup = async (request: ForwarderRequest, name: Fqdn, qtype: number) => {
    const depth = (request.lookupDepth ?? 0) + 1;
    if (depth > MAX_LOOKUP_DEPTH) return undefined;
    const reply = await top({ ...ownRequest(request, name, qtype), lookupDepth: depth });
    return Buffer.isBuffer(reply) && reply.length >= 12 ? decodeMessage(reply) : undefined;
  };
  const plugins = () => config.plugins();
  const errors = new ErrorsStage({ configs: () => plugins().errors, log });
  const logStage = new LogStage({
    rules: () => plugins().logs,
    log: log.child({ plugin: 'log' }),
    podOf: (request) => {
      const asker = askerOf(request);
      return asker?.carried ? asker.address : undefined;
    },
  });
  const template = new TemplateStage({ templates: () => plugins().templates, lookup });
  const dns64 = new Dns64Stage({ blocks: () => plugins().dns64, lookup });
  const file = new FileStage({ zones: () => plugins().files, lookup });
  // CoreDNS's order (plugin.cfg, 1.14): whatever order a Corefile writes them in, a query meets
  // them so. notify and the transfer relay first: they take other opcodes and transfers, as
  // CoreDNS's server does before any plugin. kubernetes and k8s_external are routes of the forward
  // stage (to the record-builder), between file and forward only in name.
  const chain = chainStages<ForwarderRequest>(
    [
      notify,
      relay,
      new BufsizeStage(() => plugins().bufsize),
      errors,
      logStage,
      dns64,
      new AnyStage(() => plugins().any),
      chaos,
      rewrite,
      ...(autopath ? [autopath] : []),
      acl,
      cacheStage,
      template,
      hosts,
      file,
      new LoopGuardStage(loops),
      new WhoamiStage(
        () => plugins().whoami,
        // CoreDNS's whoami comes after forward: it answers only what no forward takes.
        (name) => {
          const route = config.routes().routeFor(name);
          return route.kind !== 'unserved' && route.servers.length > 0;
        },
      ),
      guard,
    ],
    (request) => forward.serve(request),
  );
  const top: Next<ForwarderRequest> = (request) => chain(request);

  /** The namespace of the pod at `client`, from the client map, through this chain's cache (--namespace-metrics). */
  const clientNamespace = async (client: string): Promise<string | undefined> => {
    const query = parseQuery(encodeMessage(buildQueryMessage(0, clientMapName(client, clusterZone), QTYPE.TXT)));
    const request: ForwarderRequest = {
      query,
      context: { transport: 'udp', remoteAddress: '127.0.0.1', remotePort: 0, family: 4 },
      limitBytes: 65_535,
      udpPayloadBytes: options.ednsPacketMax,
      ownQuestion: true,
    };
    return clientEntryOf((await chain(request)) as Buffer | undefined)?.namespace;
  };
  const namespaces = options.namespaceSeries > 0 ? new NamespaceTally(options.namespaceSeries) : undefined;
  // Alone, this forwarder shows its own; in a pool, the pool shows every worker's (worker-pool.ts).
  if (namespaces && tally && !deps.pooled)
    namespaceQueriesMetric(registry, namespaces, () =>
      namespaces.refresh(tally.entries(), tally.overflow, clientNamespace),
    );

  /** CoreDNS's `server` label. */
  const serverLabel = () => serverLabelOf(options.listenAddresses, boundPort());
  const queries = new ServerQueryCounts(() => ({ server: serverLabel(), zone: '.' }));
  createForwarderMetrics(registry, {
    // In a pool, the process's own metrics come once, from the pool.
    processMetrics: !deps.pooled,
    ...(deps.pooled ? { worker: deps.pooled.worker } : {}),
    server: serverLabel,
    queries,
    cache,
    cacheStage,
    forward,
    budget,
    door,
    guard,
    shed: () => shedOf(listeners),
    upstreams,
    notify,
    relay,
    zones: zoneSync,
    loopDisabled: () => disabled.size,
    reloadFailures: () => config.failures,
    upstreamTcp: () => ({ open: upstreamTcp.connections(), opened: upstreamTcp.opened }),
    tcp: () => tcpCountsOf(listeners),
    ...(autopath ? { autopath: autopath.counts } : {}),
    acl: acl.counts,
    aclStage: acl,
    template: template.counts,
    dns64: dns64.counts,
    rewrite: rewrite.counts,
  });
  const handler = createQueryPipeline({
    handle: chain,
    recursionAvailable: true,
    // Forwarded whatever the class; CHAOS is answered here (statistics).
    classes: [QCLASS.IN, QCLASS.CH, QCLASS.ANY],
    // NOTIFY from the record-builder: push invalidation (zone-sync.ts).
    opcodes: [OPCODE.QUERY, OPCODE.NOTIFY],
    udpPayloadBytes: options.ednsPacketMax,
    log,
    observe: (outcome) => {
      if (outcome.rejected) rejected[outcome.rejected] = (rejected[outcome.rejected] ?? 0) + 1;
      queries.observe(outcome);
    },
  });

  // Node-local mode's NOTIFY port: NOTIFY only (through the same stage), anything else REFUSED.
  const notifyOnly = createQueryPipeline({
    handle: (request) =>
      notify.serve(request, () =>
        buildBareResponse(request.query, RCODE.REFUSED, { udpPayloadBytes: request.udpPayloadBytes }),
      ),
    recursionAvailable: false,
    classes: [QCLASS.IN],
    opcodes: [OPCODE.NOTIFY],
    udpPayloadBytes: options.ednsPacketMax,
    log,
  });

  const autopathFirst = chainFirst(clusterZone, options.autopath);
  // Logging every query needs the whole way: the lane logs nothing.
  const express = options.logQueries
    ? undefined
    : createHitLane({
        cacheStage,
        queries,
        udpPayloadBytes: options.ednsPacketMax,
        bypass: () => aclsStand || loops.outstanding(),
        leaveToChain: (raw, reply, qtype) =>
          autopathFirst(raw, reply, qtype) || (pluginsFirst?.(raw, reply, qtype) ?? false),
        // A walk kept for this asker answers here too, unless a plugin before the cache must see it.
        ...(autopath
          ? {
              walkAtOnce: (raw: Buffer, question: PlainQuestion, address: string) => {
                const walked = autopath.keptAtOnce(raw, question, address, options.ednsPacketMax);
                if (walked === undefined || pluginsFirst?.(raw, walked, question.qtype)) return undefined;
                autopath.countKept();
                return walked;
              },
            }
          : {}),
      });

  return {
    counters: cacheStage.counts,
    rejected,
    reloadConfig: async () => {
      await config.reload();
    },
    rejectedReplies: () => upstreams.rejectedTotal(),
    detectLoops: () => loops.check(config.routes().servers()),
    disabledServers: () => [...disabled],
    metricsJson: () => registry.getMetricsAsJSON(),
    clientTally: () => ({ entries: tally?.entries() ?? [], overflow: tally?.overflow ?? 0 }),
    clientNamespace,
    handle: handler,
    async start() {
      // A --server that is ourselves is a mistake in the flags: refuse to start, naming it.
      for (const rule of options.rules)
        for (const server of rule.servers)
          if (isSelf(server))
            throw new FlagError('--server', serverText(server), 'a server other than this forwarder itself');
      await config.reload();
      const { listen, drainMs } = listenerSettingsOf(options);
      for (const host of options.listenAddresses) {
        const listener = await server.listenDns(
          `dns ${host}`,
          {
            ...listen,
            host,
            port: listeners[0]?.port ?? options.port,
            handler,
            express,
            door,
            reusePort: options.reusePort,
            onHandlerError: (error) => log.debug('send failed', { err: error }),
          },
          drainMs,
        );
        listeners.push(listener);
      }
      // A Corefile's blocks on other ports or addresses: the same handler answers there too.
      for (const more of options.moreListeners ?? [])
        for (const host of more.addresses)
          listeners.push(
            await server.listenDns(
              `dns ${host}:${more.port}`,
              { ...listen, host, port: more.port, handler, express, door, reusePort: options.reusePort },
              drainMs,
            ),
          );
      let notifyPort: number | undefined;
      if (options.notifyListen) {
        const { host, port } = options.notifyListen;
        const listener = await server.listenDns(
          'notify',
          {
            host,
            port,
            flags: '-notify-listen-address',
            handler: notifyOnly,
            reusePort: options.reusePort,
            maxTcpConnections: 100,
          },
          drainMs,
        );
        notifyPort = listener.port;
      }
      // The guard's holds run out on their own; this logs each clearing when it happens.
      const guardSweep = setInterval(() => guard.heldParents(), 1000);
      guardSweep.unref();
      closers.push('subdomain guard', () => clearInterval(guardSweep));
      const poll = setInterval(() => void config.reload(), options.configPollMs);
      poll.unref();
      closers.push('config poll', () => clearInterval(poll));
      if (options.soaCheckMs > 0) {
        const soaCheck = setInterval(() => void zoneSync.checkAll(), options.soaCheckMs);
        soaCheck.unref();
        closers.push('SOA check', () => clearInterval(soaCheck));
      }
      let metricsPort = 0;
      if (!deps.pooled) {
        const metricsHttp = await server.listenHttp(
          'metrics',
          options.metricsAddress,
          options.metricsPort,
          {
            '/metrics': async () => ({
              status: 200,
              body: await registry.metrics(),
              contentType: registry.contentType,
            }),
          },
          { flags: '--metrics-address, --metrics-port', reusePort: options.reusePort },
        );
        metricsPort = metricsHttp.port;
      }
      if (options.loopDetect) await loops.check(config.routes().servers());
      const port = listeners[0]?.port ?? 0;
      log.info(deps.pooled ? 'worker ready' : 'ready', {
        port,
        metricsPort,
        addresses: options.listenAddresses,
        reusePort: options.reusePort,
        cacheSize: options.cacheSize,
        udpReceiveBufferBytes: listeners[0]?.udpReceiveBufferBytes() ?? 0,
        routes: config.routes().describe(),
      });
      return {
        port,
        addresses: [...options.listenAddresses],
        metricsPort,
        ...(notifyPort !== undefined ? { notifyPort } : {}),
      };
    },
    async shutdown() {
      // Listeners stop reading, send what is in flight, then close; the upstream sockets go last,
      // since the answers in flight still wait on them.
      await server.shutdown();
      await Promise.race([forward.settled(), sleep(options.forwardDeadlineMs)]);
      upstreamUdp.close();
      upstreamTcp.close();
      tlsUpstreams.close();
      health.close();
      // consolidate's open periods are reported now, as CoreDNS's errors does at shutdown.
      errors.flush();
    },
  };
}
