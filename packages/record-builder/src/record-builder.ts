import { CloseStack, type Logger, listenHttp, parseKubeDnsConfig, readConfigDir, sleep } from '@cluster-dns/runtime';
import { type DnsListener, listenDns } from '@cluster-dns/wire';
import type { KubeConfig } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import type { ZoneView } from './answer-builder.js';
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
  start(): Promise<{ dnsPort: number; healthzPort: number; metricsPort: number }>;
  /** SIGTERM path: fail readiness, lameduck, close listeners, stop informers. Safe twice. */
  shutdown(): Promise<void>;
  readonly state: ClusterState;
  isReady(): boolean;
}

/** The kubedns container: informers → records → authoritative answers. Building it does no I/O. */
export function createRecordBuilder(options: RecordBuilderOptions, deps: RecordBuilderDeps): RecordBuilder {
  const { log } = deps;
  const registry = deps.registry ?? new Registry();
  const metrics = createRecordBuilderMetrics(registry);
  const closers = new CloseStack();
  let ready = false;
  let draining = false;

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
  const malformedLogged = new Set<string>();
  const responder = createResponder({
    view,
    isReady: () => ready,
    transferAllowed: (address) => options.transferTo.includes(address.replace(/^::ffff:/, '')),
    observe: (o) => metrics.observeQuery(o),
    onMalformed: (error) => {
      metrics.malformed(error.headerReadable ? 'formerr' : 'dropped');
      // One line per kind of problem, not one per packet: a flood must not flood the logs.
      if (!malformedLogged.has(error.message) && malformedLogged.size < 100) {
        malformedLogged.add(error.message);
        log.warn('malformed query', { reason: error.message, answered: error.headerReadable ? 'FORMERR' : 'dropped' });
      }
    },
  });

  const resources: ResourceName[] = watchedResources(options);
  const watchers = createWatchers({
    kubeConfig: deps.kubeConfig,
    state,
    resources,
    log,
    hooks: {
      onSynced: (r) => metrics.synced(r, Date.now()),
      onError: (r) => metrics.watchError(r),
      onRestart: (r) => metrics.watchRestart(r),
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

  return {
    state,
    isReady: () => ready && !draining,
    async start() {
      await warnAboutConfigDir(options.configDir, log);
      const dns: DnsListener = await listenDns({
        host: options.dnsHost,
        port: options.dnsPort,
        handler: (raw, context) => responder.handle(raw, context),
        onHandlerError: (error) => log.error('query handler failed', { err: error }),
      });
      closers.push('dns', () => dns.close());
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
      const synced = watchers.start();
      const timedOut = await Promise.race([
        synced
          .then(() => watchers.allSynced())
          .then(async (all) => {
            if (all) return false;
            // Some resource failed its first list: keep waiting for its restart, up to the timeout.
            while (!watchers.allSynced()) await sleep(100);
            return false;
          }),
        sleep(options.initialSyncTimeoutMs).then(() => true),
      ]);
      if (timedOut) {
        log.warn('initial sync timed out; serving what is known', {
          timeoutMs: options.initialSyncTimeoutMs,
          unsynced: resources.filter((r) => !watchers.isSynced(r)),
        });
      }
      ready = true;
      log.info('ready', {
        ...ports,
        services: state.serviceCount,
        records: state.index.recordCount,
        synced: !timedOut,
      });
      return ports;
    },
    async shutdown() {
      if (draining) return closers.close(log);
      draining = true;
      log.info('lameduck: readiness failing, still answering', { lameduckMs: options.lameduckMs });
      await sleep(options.lameduckMs);
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
