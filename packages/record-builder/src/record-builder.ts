import { type Logger, parseKubeDnsConfig, readConfigDir, ServerCore } from '@cluster-dns/runtime';
import { createQueryPipeline, createUdpFanout, type DnsListener, exchangeRaw, type Fqdn } from '@cluster-dns/wire';
import { Registry } from 'prom-client';
import type { ZoneView } from './answer-builder.js';
import { createAnswerLane } from './answer-lane.js';
import { createApiFeed } from './api-feed.js';
import { dumpStore } from './cache-dump.js';
import { ENDPOINT, serviceKey } from './cluster-model.js';
import { ClusterState, ZONE_BIT } from './cluster-state.js';
import { addressAt } from './endpoint-group.js';
import { fullGc } from './full-gc.js';
import type { KubeConfigSource } from './kube-config-source.js';
import { createRecordBuilderMetrics } from './metrics.js';
import { NodeCacheShard } from './node-cache-shard.js';
import { createNotifier, type Notifier } from './notifier.js';
import { createNotifyChanges } from './notify-changes.js';
import type { RecordBuilderOptions } from './options.js';
import { createResponder } from './responder.js';
import { type ResourceName, watchedResources } from './watched-resources.js';
import { servedZones, type ZoneRequest } from './zone-stage.js';

export interface RecordBuilderDeps {
  log: Logger;
  /** Where the API is: loaded by the API worker, so client-node never runs on the answering thread. */
  kube: KubeConfigSource;
  registry?: Registry;
}

/** Objects per list page: as client-go's reflector, so a large cluster is never one huge response. */
export const LIST_PAGE_SIZE = 500;
/**
 * Updates per message from the API worker. Small batches keep each main-thread slice short and
 * the worker reading the watch stream while one is applied; at 256, 1,000 events/s of real-shaped
 * slices stalled the worker long enough for the test API server to close it as a slow watcher.
 */
export const MAX_BATCH = 16;
/**
 * A NOTIFY is answered once the forwarder has fetched the change and dropped what it made stale
 * (an IXFR over loopback): well under this unless it is busy, and then a retry is right.
 */
const NOTIFY_TIMEOUT_MS = 2000;
/**
 * NOTIFYs a second to node caches at most, on average: about half a core at ~50 µs each with its
 * answer (bench case 9). Above 500 node caches with two zones changing, the window grows past
 * --notify-node-cache-interval: 1,667 caches (a third of 5,000) wait ~330 ms.
 */
const NODE_CACHE_NOTIFIES_PER_SECOND = 10_000;
/** NOTIFYs in flight at once that make node caches fetch (the fleet's first, or one far behind). */
const NODE_CACHE_FETCHING = 32;
/** A NOTIFY per zone this often without changes, so a forwarder that restarted learns it is pushed to. */
const NOTIFY_HEARTBEAT_MS = 30_000;

export interface RecordBuilder {
  /** Binds and starts watching; resolves once listening. Ready comes later (see `whenReady`). */
  start(): Promise<{ dnsPort: number; healthzPort: number; metricsPort: number }>;
  /** Resolves when ready: every resource synced, or --initial-sync-timeout passed. */
  whenReady(): Promise<void>;
  /** SIGTERM path: fail readiness, lameduck, drain and close listeners, stop watches. Safe twice. */
  shutdown(): Promise<void>;
  readonly state: ClusterState;
  isReady(): boolean;
}

/**
 * The kubedns container: reflectors → records → authoritative answers. This shell builds the
 * store, the chain that answers from it (zones → transfers → answers, responder.ts), the API feed
 * and the notifier, then binds and closes them in order. Building it does no I/O.
 */
export function createRecordBuilder(options: RecordBuilderOptions, deps: RecordBuilderDeps): RecordBuilder {
  const { log } = deps;
  const registry = deps.registry ?? new Registry();
  const metrics = createRecordBuilderMetrics(registry);
  const server = new ServerCore({ log, lameduckMs: options.lameduckMs, lameduck: 'untilReady' });
  const { closers } = server;
  let markReady: () => void = () => {};
  const readyPromise = new Promise<void>((resolve) => {
    markReady = resolve;
  });

  const clustersetZone = options.multiclusterZone ? { clustersetZone: options.multiclusterZone } : {};
  const state = new ClusterState({
    zone: options.zone,
    reverseZones: options.reverseZones,
    ttlSeconds: options.ttlSeconds,
    ...clustersetZone,
  });
  // IXFR answers from the journal; it costs nothing until someone transfers (references only).
  if (
    options.notify.length > 0 ||
    options.notifyNodeCaches.length > 0 ||
    options.nodeCacheDiscovery ||
    options.transferTo.length > 0
  )
    state.keepJournal(options.ixfrJournalMib << 20);
  if (options.serviceCidrs.length) state.upsertServiceCidr({ name: '--service-cidr', cidrs: options.serviceCidrs });
  const view: ZoneView = {
    zone: options.zone,
    ...clustersetZone,
    reverseZones: options.reverseZones,
    ttlSeconds: options.ttlSeconds,
    pods: options.pods,
    dnsService: options.dnsService,
    state,
    ...(options.namespaces ? { exposedNamespaces: new Set(options.namespaces) } : {}),
    ...(options.ignoreEmptyService ? { ignoreEmptyService: true } : {}),
    ...(options.external.length ? { external: options.external } : {}),
    ...(options.externalReverseZones.length ? { externalReverseZones: options.externalReverseZones } : {}),
  };
  const notifyHosts = [...options.notify, ...options.notifyNodeCaches].map((t) => t.host);
  const responder = createResponder({
    view,
    isReady: () => server.answering,
    transferAllowed: (address) => {
      const plain = address.replace(/^::ffff:/, '');
      return options.transferTo.includes(plain) || notifyHosts.includes(plain);
    },
    onTransfer: (type, result, foreign) => metrics.transferred(type, result, foreign),
    answerCacheBytes: options.answerCacheMib * 1048576,
  });
  const notifier = createRecordBuilderNotifier(options, 'forwarders', view, log, metrics);
  const nodeCacheNotifier = createRecordBuilderNotifier(options, 'node-caches', view, log, metrics);
  const discovery = options.nodeCacheDiscovery;
  const shard = discovery
    ? new NodeCacheShard({
        self: options.podIp,
        onTargets: (hosts) => {
          log.info('node caches to push to', { count: hosts.length, replicas: shard?.counts().replicas });
          nodeCacheNotifier?.setTargets([
            ...options.notifyNodeCaches,
            ...hosts.map((host) => ({ host, port: discovery.port })),
          ]);
        },
      })
    : undefined;
  if (shard && !options.podIp)
    log.warn('--node-cache-selector without --pod-ip: this replica pushes to every node cache, as would each replica');
  // The replicas that share the node caches: --dns-service's ready endpoints, not terminating.
  const dnsServiceKey = serviceKey(options.dnsService.namespace, options.dnsService.name);
  const replicasChanged = () => {
    const addresses: string[] = [];
    for (const group of state.groupsOf(dnsServiceKey))
      for (let i = 0; i < group.count; i++)
        if (((group.flags[i] as number) & (ENDPOINT.READY | ENDPOINT.TERMINATING)) === ENDPOINT.READY)
          addresses.push(addressAt(group, group.starts[i] as number));
    shard?.setReplicas(addresses);
  };
  const [inAddr, ip6] = options.reverseZones;
  state.onChange((owners, zones) => {
    if (shard && owners.includes(dnsServiceKey)) replicasChanged();
    responder.invalidate(owners);
    if (!server.answering) return;
    const at = Date.now();
    // Only the zones that changed: most churn (endpoints of ClusterIP Services) is the cluster
    // zone's alone, a third of the NOTIFYs and fetches of notifying all three.
    const changed: Fqdn[] = [];
    if (zones & ZONE_BIT.cluster) changed.push(options.zone);
    if (zones & ZONE_BIT.inAddr && inAddr) changed.push(inAddr);
    if (zones & ZONE_BIT.ip6 && ip6) changed.push(ip6);
    if (zones & ZONE_BIT.clusterset && options.multiclusterZone) changed.push(options.multiclusterZone);
    notifier?.changed(at, changed);
    nodeCacheNotifier?.changed(at, changed);
  });
  const handler = createQueryPipeline({
    handle: responder.handle,
    recursionAvailable: false,
    udpPayloadBytes: options.ednsPacketMax,
    log,
    observe: (outcome) => {
      // The zone stage noted the zone: kube-dns's split of its metrics, without a second lookup.
      const zone = (outcome.request as ZoneRequest | undefined)?.zone;
      const reverse = zone !== undefined && view.reverseZones.includes(zone);
      metrics.observeQuery(outcome, reverse ? 'reverse' : 'auth');
    },
  });

  const resources: ResourceName[] = watchedResources(options);
  const feed = createApiFeed({
    state,
    log,
    worker: {
      kube: deps.kube,
      resources,
      pageSize: LIST_PAGE_SIZE,
      retryBaseMs: 500,
      retryMaxMs: 30_000,
      maxBatch: MAX_BATCH,
      logLevel: log.level === 'debug' ? 'debug' : 'info',
      ...(options.endpointPodNames ? { endpointPodNames: true } : {}),
      ...(options.multiclusterZone ? { multicluster: true } : {}),
      ...(discovery ? { nodeCaches: { namespace: discovery.namespace, labelSelector: discovery.labelSelector } } : {}),
    },
    ...(shard ? { nodeCaches: shard } : {}),
    hooks: {
      onWatching: (r) => metrics.watching(r, Date.now()),
      onError: (r) => metrics.watchError(r),
      onRelist: (r, reason) => metrics.relisted(r, reason),
      onApplied: (r, ns, delayMs) => metrics.eventApplied(r, ns, delayMs),
      onProgrammed: (change) => metrics.programmed(change),
    },
  });

  const metricsBody = async () => {
    metrics.store({
      endpoints: state.endpointCount,
      services: state.serviceCount,
      cacheEntries: responder.cache.size,
      cacheBytes: responder.cache.bytes,
      backlog: feed.backlog(),
      lagSeconds: feed.lagMs(Date.now()) / 1000,
      coalesced: feed.coalesced(),
      workerHeap: feed.workerHeap(),
    });
    if (state.journal) metrics.journal({ bytes: state.journal.sizeBytes, changes: state.journal.size });
    if (shard) metrics.nodeCaches(shard.counts());
    metrics.ready(server.isReady());
    return { status: 200, body: await registry.metrics(), contentType: registry.contentType };
  };

  let stopWaiting: () => void = () => {};
  const shutdownStarted = new Promise<void>((resolve) => {
    stopWaiting = resolve;
  });
  /** Ready once every resource's first list is applied, or when the timeout passes; not if shut down first. */
  const becomeReady = async (ports: Record<string, number>) => {
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, options.initialSyncTimeoutMs);
      timer.unref();
    });
    await Promise.race([feed.whenSynced(), timedOut, shutdownStarted]);
    clearTimeout(timer);
    if (server.draining) return;
    const synced = feed.allSynced();
    if (!synced) {
      log.warn('initial sync timed out; serving what is known', {
        timeoutMs: options.initialSyncTimeoutMs,
        unsynced: resources.filter((r) => !feed.isSynced(r)),
      });
    }
    // The first lists' garbage (parsed pages in the worker, applied batches here) goes now, once,
    // before traffic comes: nothing else would collect it, and it would stay the container's
    // steady RSS (full-gc.ts). The worker's runs on its own thread meanwhile.
    fullGc();
    void feed.gc();
    state.markServed();
    server.markReady();
    log.info('ready', { ...ports, services: state.serviceCount, endpoints: state.endpointCount, synced });
    markReady();
    if (nodeCacheNotifier) {
      nodeCacheNotifier.start();
      closers.push('node cache notifier', () => nodeCacheNotifier.stop());
    }
    if (notifier) {
      notifier.start();
      closers.push('notifier', () => notifier.stop());
    }
  };

  return {
    state,
    isReady: () => server.isReady(),
    whenReady: () => readyPromise,
    async start() {
      await warnAboutConfigDir(options.configDir, log);
      const dns: DnsListener = await server.listenDns(
        'dns',
        {
          host: options.dnsHost,
          port: options.dnsPort,
          flags: '--dns-bind-address, --dns-port',
          handler,
          express: createAnswerLane({
            cache: responder.cache,
            isReady: () => server.answering,
            udpPayloadBytes: options.ednsPacketMax,
            count: metrics.countAnswered,
          }),
          maxTcpConnections: options.maxTcpConnections,
          maxTcpConnectionsPerClient: options.maxTcpConnectionsPerClient,
          tcpIdleTimeoutMs: options.tcpIdleTimeoutMs,
          ...options.tcpBackpressure,
          onHandlerError: (error) => log.debug('send failed', { err: error }),
        },
        2000,
      );
      metrics.tcpFrom(dns);
      const healthz = await server.listenHttp(
        'healthz',
        options.healthzHost,
        options.healthzPort,
        {
          '/readiness': () => (server.isReady() ? { status: 200, body: 'ok\n' } : { status: 503, body: 'not ready\n' }),
          '/healthz': () => ({ status: 200, body: 'ok\n' }),
          '/cache': (_req, url) => ({
            status: 200,
            body: JSON.stringify(dumpStore(view, url.searchParams.get('name') ?? undefined), null, 1),
            contentType: 'application/json',
          }),
          '/metrics': metricsBody,
          // Memory after a full GC of both threads: what the bench's "after GC" column reads.
          '/debug/gc': async () => {
            fullGc();
            const worker = await feed.gc();
            const body = JSON.stringify({
              ...process.memoryUsage(),
              workerHeapUsed: worker.heapUsed,
              workerHeapTotal: worker.heapTotal,
            });
            return { status: 200, body, contentType: 'application/json' };
          },
        },
        { flags: '--healthz-bind-address, --healthz-port' },
      );
      // Corefile mode's ready, as CoreDNS's: 200 OK once the cluster's records are in, 503 before
      // and from SIGTERM on (the lameduck).
      const readyAddress = options.readyAddress;
      if (readyAddress) {
        await server.listenHttp(
          'ready',
          readyAddress.host,
          readyAddress.port,
          {
            '/ready': () => (server.isReady() ? { status: 200, body: 'OK' } : { status: 503, body: 'kubernetes\n' }),
          },
          { flags: 'the Corefile’s ready' },
        );
      }
      const metricsHttp = await server.listenHttp(
        'metrics',
        options.healthzHost,
        options.metricsPort,
        { '/metrics': metricsBody },
        { flags: '--healthz-bind-address, --metrics-port' },
      );
      const ports = { dnsPort: dns.port, healthzPort: healthz.port, metricsPort: metricsHttp.port };
      log.info('listening', {
        ...ports,
        dnsAddress: options.dnsHost,
        zone: options.zone,
        udpReceiveBufferBytes: dns.udpReceiveBufferBytes(),
      });
      closers.push('API worker', () => feed.stop());
      const kube = await feed.start();
      log.info('kubeconfig loaded', kube);
      void becomeReady(ports);
      return ports;
    },
    async shutdown() {
      stopWaiting();
      // Going while answering: the node caches fetch once, for a position the next replica places.
      // Halfway through the lameduck: the replica taking over was ready before this SIGTERM, and
      // this one's watches may lag its list by a moment; the fetches have the other half.
      if (server.answering && nodeCacheNotifier) {
        const handOver = setTimeout(() => nodeCacheNotifier.handOver(), options.lameduckMs / 2);
        handOver.unref();
        closers.push('node cache hand-over', () => clearTimeout(handOver));
      }
      // Never ready, never in the Service's endpoints: no traffic to wait out (ServerCore's untilReady).
      await server.shutdown();
    },
  };
}

/**
 * A NOTIFY sender (its targets, the zones, the serial), or undefined without targets: `--notify`
 * (each target its own metrics label), or `--notify-node-cache` (at most one NOTIFY per cache per
 * `--notify-node-cache-interval`, and one label, `node-caches`, so a thousand nodes are not a
 * thousand series).
 */
function createRecordBuilderNotifier(
  options: RecordBuilderOptions,
  which: 'forwarders' | 'node-caches',
  view: ZoneView,
  log: Logger,
  metrics: ReturnType<typeof createRecordBuilderMetrics>,
): Notifier | undefined {
  const nodeCaches = which === 'node-caches';
  const targets = nodeCaches ? options.notifyNodeCaches : options.notify;
  // Found in the API (--node-cache-selector): targets come later, by setTargets.
  if (targets.length === 0 && !(nodeCaches && options.nodeCacheDiscovery)) return undefined;
  const targetName = (t: { host: string; port: number }) =>
    nodeCaches ? 'node-caches' : t.host.includes(':') ? `[${t.host}]:${t.port}` : `${t.host}:${t.port}`;
  // Node caches: one socket for the fleet, and the names changed in the NOTIFY itself, so a cache
  // in step drops them and answers without a transfer (the Pod's forwarder fetches: it is one).
  const fanout = nodeCaches ? createUdpFanout() : undefined;
  const notifier = createNotifier({
    targets,
    zones: servedZones({ ...options, clustersetZone: options.multiclusterZone }),
    serial: () => view.state.serial,
    send: (target, message) =>
      fanout
        ? fanout.exchange(target, message, NOTIFY_TIMEOUT_MS)
        : exchangeRaw(target, message, { timeoutMs: NOTIFY_TIMEOUT_MS }),
    ...(nodeCaches ? { changes: createNotifyChanges(view) } : {}),
    log,
    heartbeatMs: NOTIFY_HEARTBEAT_MS,
    minIntervalMs: nodeCaches ? options.notifyNodeCacheIntervalMs : 0,
    ...(nodeCaches ? { maxPerSecond: NODE_CACHE_NOTIFIES_PER_SECOND, maxFetching: NODE_CACHE_FETCHING } : {}),
    hooks: {
      onSent: (t, zone) => metrics.notifySent(targetName(t), zone),
      onFailed: (t, zone) => metrics.notifyFailed(targetName(t), zone),
      onAcked: (t, _zone, ms) => metrics.notifyAcked(targetName(t), ms / 1000),
    },
  });
  return {
    ...notifier,
    stop() {
      notifier.stop();
      fanout?.close();
    },
  };
}

async function warnAboutConfigDir(dir: string, log: Logger): Promise<void> {
  if (!dir) return;
  try {
    const config = parseKubeDnsConfig(await readConfigDir(dir));
    if (config.federations)
      log.warn('federations in the ConfigMap are not supported and are ignored', { federations: config.federations });
  } catch (error) {
    // The forwarder owns stubDomains and upstreamNameservers; here a bad file only earns a warning.
    log.warn('config dir unreadable or invalid', { configDir: dir, err: error });
  }
}
