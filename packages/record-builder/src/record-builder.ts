import { CloseStack, type Logger, listenHttp, parseKubeDnsConfig, readConfigDir, sleep } from '@cluster-dns/runtime';
import { createQueryPipeline, type DnsListener, listenDns } from '@cluster-dns/wire';
import type { KubeConfig } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { type ZoneView, zoneOf } from './answer-builder.js';
import { createApiClient } from './api-client.js';
import { dumpStore } from './cache-dump.js';
import { ClusterState } from './cluster-state.js';
import { createRecordBuilderMetrics } from './metrics.js';
import type { RecordBuilderOptions } from './options.js';
import { createResponder } from './responder.js';
import { createWatchers, type ResourceName, watchedResources } from './watchers.js';

export interface RecordBuilderDeps {
  log: Logger;
  kubeConfig: KubeConfig;
  registry?: Registry;
}

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

/** The kubedns container: reflectors → records → authoritative answers. Building it does no I/O. */
export function createRecordBuilder(options: RecordBuilderOptions, deps: RecordBuilderDeps): RecordBuilder {
  const { log } = deps;
  const registry = deps.registry ?? new Registry();
  const metrics = createRecordBuilderMetrics(registry);
  const closers = new CloseStack();
  let ready = false;
  let draining = false;
  let markReady: () => void = () => {};
  const readyPromise = new Promise<void>((resolve) => {
    markReady = resolve;
  });

  const state: ClusterState = new ClusterState(
    { zone: options.zone, reverseZones: options.reverseZones, ttlSeconds: options.ttlSeconds },
    (names) => responder.invalidate(names),
  );
  const view: ZoneView = {
    zone: options.zone,
    reverseZones: options.reverseZones,
    ttlSeconds: options.ttlSeconds,
    pods: options.pods,
    dnsService: options.dnsService,
    state,
  };
  const responder = createResponder({
    view,
    isReady: () => ready,
    transferAllowed: (address) => options.transferTo.includes(address.replace(/^::ffff:/, '')),
  });
  const handler = createQueryPipeline({
    handle: responder.handle,
    recursionAvailable: false,
    udpPayloadBytes: options.ednsPacketMax,
    log,
    observe: (outcome) => {
      const zone = outcome.query ? zoneOf(view, outcome.query.key) : undefined;
      metrics.observeQuery(outcome, zone === undefined || zone === view.zone ? 'auth' : 'reverse');
    },
  });

  const resources: ResourceName[] = watchedResources(options);
  const watchers = createWatchers({
    api: createApiClient(deps.kubeConfig),
    state,
    resources,
    log,
    hooks: {
      onWatching: (r) => metrics.watching(r, Date.now()),
      onError: (r) => metrics.watchError(r),
      onRelist: (r, reason) => metrics.relisted(r, reason),
      onEvent: (r, _type, ns) => metrics.eventApplied(r, ns),
    },
  });

  const metricsBody = async () => {
    metrics.store({
      records: state.index.recordCount,
      names: state.index.nameCount,
      services: state.serviceCount,
      readyAnswers: responder.readyAnswerCount(),
    });
    metrics.ready(ready && !draining);
    return { status: 200, body: await registry.metrics(), contentType: registry.contentType };
  };

  /** Waits for every resource's first list, or the timeout; then ready. Ends early on shutdown. */
  const becomeReady = async (ports: Record<string, number>) => {
    const started = Date.now();
    while (!watchers.allSynced() && !draining && Date.now() - started < options.initialSyncTimeoutMs) {
      await sleep(Math.min(50, options.initialSyncTimeoutMs));
    }
    if (draining) return;
    const synced = watchers.allSynced();
    if (!synced) {
      log.warn('initial sync timed out; serving what is known', {
        timeoutMs: options.initialSyncTimeoutMs,
        unsynced: resources.filter((r) => !watchers.isSynced(r)),
      });
    }
    ready = true;
    log.info('ready', { ...ports, services: state.serviceCount, records: state.index.recordCount, synced });
    markReady();
  };

  return {
    state,
    isReady: () => ready && !draining,
    whenReady: () => readyPromise,
    async start() {
      await warnAboutConfigDir(options.configDir, log);
      const dns: DnsListener = await listenDns({
        host: options.dnsHost,
        port: options.dnsPort,
        handler,
        onHandlerError: (error) => log.debug('send failed', { err: error }),
      });
      closers.push('dns', () => dns.close({ deadlineMs: 2000 }));
      const healthz = await listenHttp(options.healthzHost, options.healthzPort, {
        '/readiness': () => (ready && !draining ? { status: 200, body: 'ok\n' } : { status: 503, body: 'not ready\n' }),
        '/healthz': () => ({ status: 200, body: 'ok\n' }),
        '/cache': (_req, url) => ({
          status: 200,
          body: JSON.stringify(dumpStore(state, url.searchParams.get('name') ?? undefined), null, 1),
          contentType: 'application/json',
        }),
        '/metrics': metricsBody,
        // Only when started with node --expose-gc (the benchmark does): memory after a full GC.
        '/debug/gc': () => {
          const gc = (globalThis as { gc?: () => void }).gc;
          if (!gc) return { status: 404, body: 'start node with --expose-gc to enable\n' };
          gc();
          return { status: 200, body: JSON.stringify(process.memoryUsage()), contentType: 'application/json' };
        },
      });
      closers.push('healthz', () => healthz.close());
      const metricsHttp = await listenHttp(options.healthzHost, options.metricsPort, { '/metrics': metricsBody });
      closers.push('metrics', () => metricsHttp.close());
      const ports = { dnsPort: dns.port, healthzPort: healthz.port, metricsPort: metricsHttp.port };
      log.info('listening', { ...ports, dnsAddress: options.dnsHost, zone: options.zone });
      closers.push('watchers', () => watchers.stop());
      watchers.start();
      void becomeReady(ports);
      return ports;
    },
    async shutdown() {
      if (draining) return closers.close(log);
      draining = true;
      // Never ready, never in the Service's endpoints: no traffic to wait out.
      if (ready) {
        log.info('lameduck: readiness failing, still answering', { lameduckMs: options.lameduckMs });
        await sleep(options.lameduckMs);
      }
      await closers.close(log);
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
