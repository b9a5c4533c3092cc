import { randomUUID } from 'node:crypto';
import { Worker } from 'node:worker_threads';
import {
  ClusterDnsError,
  collectProcessMetrics,
  counterFrom,
  FlagError,
  gaugeFrom,
  type Logger,
  ServerCore,
} from '@cluster-dns/runtime';
import { reusePortSupported } from '@cluster-dns/wire';
import { AggregatorRegistry, type MetricObjectWithValues, type MetricValue, Registry } from 'prom-client';
import { monotonicMs } from '../cache.js';
import { createForwarder, type ForwarderDeps } from '../forwarder.js';
import { createCacheMetrics } from '../metrics.js';
import type { ForwarderOptions } from '../options.js';
import type { ForwarderStarted, Serving } from '../serving.js';
import { createSharedAnswerMemory, SharedAnswerStore, sharedSizingFor } from '../shared-cache/shared-answer-store.js';
import { WORKER_SCRIPTS } from '../worker-script.js';
import { broadcastLink, createWorkerPeers, type WorkerPeers } from './worker-peers.js';

type MetricsJson = Array<MetricObjectWithValues<MetricValue<string>>>;

/** What each worker thread is started with (forwarder-worker.ts). */
export interface WorkerData {
  kind: 'forwarder' | 'node-cache';
  program: string;
  /** The process's flags, parsed again in the worker (functions and sockets do not cross threads). */
  argv: readonly string[];
  index: number;
  count: number;
  /** The DNS port every worker binds (the first worker's, when the flags say 0). */
  port: number;
  notifyPort: number | undefined;
  /** The BroadcastChannel the workers share (worker-peers.ts). */
  channel: string;
  /** The answers every worker keeps and reads (shared-cache/): made here, so a restarted worker finds them. */
  cacheMemory: SharedArrayBuffer;
}

export type ToWorker = { t: 'metrics'; id: number } | { t: 'stop' };
type FromWorker =
  | { t: 'ready'; port: number; notifyPort: number | undefined }
  | { t: 'failed'; error: { message?: string; code?: string } }
  | { t: 'metrics'; id: number; json: MetricsJson }
  | { t: 'stopped' };

/** The forwarder this thread runs as worker 0, with what it shares with the others. */
export type LeaderFactory = (shared: { peers: WorkerPeers; sharedCache: SharedAnswerStore; log: Logger }) => Serving & {
  metricsJson(): Promise<MetricsJson>;
};

/** Worker 0 as the shells build it: the forwarder they would run alone, bound beside the workers. */
export function forwarderLeader(options: ForwarderOptions, config?: ForwarderDeps['config']): LeaderFactory {
  return ({ peers, sharedCache, log }) =>
    createForwarder({ ...options, reusePort: true }, { log, peers, sharedCache, ...(config ? { config } : {}) });
}

export interface WorkerPool {
  start(): Promise<ForwarderStarted>;
  /** Every worker's lameduck and drain, at once. */
  shutdown(): Promise<void>;
}

/** --workers above 1 needs SO_REUSEPORT: Node 22.12+ (the images run Node 22). */
export function checkWorkers(flag: string, workers: number): void {
  if (workers > 1 && !reusePortSupported())
    throw new FlagError(
      flag,
      String(workers),
      `1 on Node.js ${process.versions.node}: more workers bind one port with SO_REUSEPORT, which needs Node.js 22.12 or later`,
    );
}

/**
 * --workers=N: N forwarders in one process, each binding the DNS port with SO_REUSEPORT, so the
 * kernel spreads clients over them by address and port (node:cluster hands every worker one
 * shared UDP handle, and one worker then takes most datagrams). Worker 0 is this thread's own
 * forwarder (the shell's `leader`), which leads zone sync; the other N - 1 run in worker threads,
 * and this thread starts again any that dies. They share one cache (shared-cache/, in memory made
 * here, so a worker started again finds it whole), through which worker 0's drops reach them all
 * (worker-peers.ts). This thread serves /metrics, summed over the workers.
 */
export function createWorkerPool(options: {
  kind: WorkerData['kind'];
  program: string;
  argv: readonly string[];
  count: number;
  addresses: readonly string[];
  port: number;
  notifyPort?: number;
  /** Where the summed /metrics is served (port 0: a free one). */
  metrics: { address: string; port: number; flags: string };
  /** Bind /metrics with SO_REUSEPORT too (node-local mode's handover). */
  reusePort: boolean;
  /** Entries the shared cache holds at most (--cache-size). */
  cacheSize: number;
  /** Seconds an expired answer is kept for serve-stale (--max-stale): the leader's store's. */
  maxStaleSeconds: number;
  /**
   * Worker 0: a whole forwarder in this thread (built by the shell, as it builds one without
   * workers), leading zone sync; the other count - 1 run in worker threads. A thread of its own
   * would cost the process a second copy of everything a forwarder loads (bench case 11: ~17 MiB).
   */
  leader: LeaderFactory;
  log: Logger;
  /** The worker script (default: forwarder-worker.js beside this module); tests give a stand-in. */
  workerScript?: URL;
}): WorkerPool {
  const { log, count } = options;
  const channel = `cluster-dns-${randomUUID()}`;
  const workers: Array<Worker | undefined> = new Array(count).fill(undefined);
  const metricsWaiters = new Map<number, (json: MetricsJson) => void>();
  let nextId = 1;
  let stopping = false;
  let restarts = 0;
  let port = options.port;
  let notifyPort = options.notifyPort;
  /** Each worker's counters as last scraped: what a worker that died had counted (below). */
  const lastScraped: Array<MetricsJson | undefined> = new Array(count).fill(undefined);
  /**
   * The counters and histograms of workers that died, as last scraped, summed in at every scrape
   * from then on: a restarted worker counts from 0, and without these the sum would fall, which
   * Prometheus reads as a counter reset. What a worker counted after the last scrape is lost.
   */
  const retired: MetricsJson[] = [];

  const cacheMemory = createSharedAnswerMemory(sharedSizingFor(options.cacheSize));
  const sharedCache = new SharedAnswerStore(cacheMemory, monotonicMs, options.maxStaleSeconds);
  const leaderLog = log.child({ worker: 0 });
  const leaderPeers = createWorkerPeers({
    link: broadcastLink(channel),
    index: 0,
    count,
    timeoutMs: 1_000,
    log: leaderLog,
  });
  const leader = options.leader({ peers: leaderPeers, sharedCache, log: leaderLog });
  let leaderServing = false;
  const registry = new Registry();
  collectProcessMetrics(registry);
  // The store's own series once, from here: every worker reads and writes the same entries.
  createCacheMetrics(registry, sharedCache, () => `dns://${options.addresses[0] ?? ''}:${port}`);
  gaugeFrom(registry, 'clusterdns_forwarder_workers', 'Worker threads serving now (--workers).', [], () => [
    [{}, workers.filter(Boolean).length + (leaderServing ? 1 : 0)],
  ]);
  counterFrom(
    registry,
    'clusterdns_forwarder_worker_restarts_total',
    'Worker threads that died and were started again.',
    () => restarts,
  );

  const spawn = (index: number): Promise<void> =>
    new Promise((resolve, reject) => {
      const data: WorkerData = {
        kind: options.kind,
        program: options.program,
        argv: options.argv,
        index,
        count,
        port,
        notifyPort,
        channel,
        cacheMemory,
      };
      const worker = new Worker(options.workerScript ?? WORKER_SCRIPTS[options.kind], {
        workerData: data,
      });
      let ready = false;
      worker.on('message', (message: FromWorker) => {
        if (message.t === 'ready') {
          ready = true;
          workers[index] = worker;
          port = message.port;
          notifyPort = message.notifyPort;
          resolve();
        } else if (message.t === 'failed') {
          const { code, message: text = 'worker failed to start' } = message.error;
          reject(
            code === 'DNS_BIND' || code === 'HTTP_BIND' || code === 'COREFILE_INVALID' || code === 'FLAG_INVALID'
              ? new ClusterDnsError(code, text)
              : new ClusterDnsError('WORKER_FAILED', `worker ${index}: ${text}`),
          );
        } else if (message.t === 'metrics') {
          metricsWaiters.get(message.id)?.(message.json);
        } else if (message.t === 'stopped') {
          // Drained; whatever handle is left (an unref'd timer) must not hold the process.
          void worker.terminate();
        }
      });
      worker.on('error', (error) => log.error('worker failed', { worker: index, err: error }));
      worker.on('exit', (code) => {
        if (workers[index] === worker) workers[index] = undefined;
        const last = lastScraped[index];
        lastScraped[index] = undefined;
        if (ready && last) retired.push(last.filter((m) => ['counter', 'histogram'].includes(String(m.type))));
        if (!ready)
          reject(new ClusterDnsError('WORKER_FAILED', `worker ${index} exited (${code}) before it was ready`));
        else if (!stopping) {
          // The kernel sends its clients to the others meanwhile; its cache starts empty.
          restarts++;
          log.error('worker exited; starting it again', { worker: index, code });
          const again = () =>
            spawn(index).catch((error: unknown) => {
              log.error('worker did not start again; retrying', { worker: index, err: error });
              if (!stopping) setTimeout(again, 1_000).unref();
            });
          setTimeout(again, 100).unref();
        }
      });
    });

  const workerMetrics = (worker: Worker): Promise<MetricsJson | undefined> =>
    new Promise((resolve) => {
      const id = nextId++;
      const timer = setTimeout(() => {
        metricsWaiters.delete(id);
        resolve(undefined);
      }, 2_000);
      metricsWaiters.set(id, (json) => {
        clearTimeout(timer);
        metricsWaiters.delete(id);
        resolve(json);
      });
      worker.postMessage({ t: 'metrics', id } satisfies ToWorker);
    });

  // The pool's /metrics on a server core: the workers, each a forwarder, have their own.
  const server = new ServerCore({ log, lameduckMs: 0, lameduck: 'always' });
  return {
    async start() {
      try {
        // Worker 0 first, so a port of 0 is picked once and the others bind beside it.
        const started = await leader.start();
        leaderServing = true;
        port = started.port;
        notifyPort = started.notifyPort;
        await Promise.all(Array.from({ length: count - 1 }, (_, i) => spawn(i + 1)));
      } catch (error) {
        stopping = true;
        await Promise.all(workers.map((w) => w?.terminate()));
        if (leaderServing) await leader.shutdown();
        leaderPeers.close();
        throw error;
      }
      const http = await server.listenHttp(
        'metrics',
        options.metrics.address,
        options.metrics.port,
        {
          '/metrics': async () => {
            const all = await Promise.all(
              workers.map(async (w, index) => {
                const json = w && (await workerMetrics(w));
                if (json && workers[index] === w) lastScraped[index] = json;
                return json;
              }),
            );
            // Folded into one set: a worker dying over and over keeps no more than one set of counts.
            if (retired.length > 1)
              retired.splice(
                0,
                retired.length,
                (await AggregatorRegistry.aggregate(retired).getMetricsAsJSON()) as MetricsJson,
              );
            const summed = AggregatorRegistry.aggregate([
              await registry.getMetricsAsJSON(),
              await leader.metricsJson(),
              ...all.filter((j) => j !== undefined),
              ...retired,
            ]);
            return { status: 200, body: await summed.metrics(), contentType: summed.contentType };
          },
        },
        { flags: options.metrics.flags, reusePort: options.reusePort },
      );
      const started = {
        port,
        addresses: [...options.addresses],
        metricsPort: http.port,
        ...(notifyPort !== undefined ? { notifyPort } : {}),
      };
      log.info('ready', { ...started, workers: count, reusePort: true });
      return started;
    },
    async shutdown() {
      stopping = true;
      await Promise.all([
        leader.shutdown(),
        ...workers.map(
          (worker) =>
            worker &&
            new Promise<void>((resolve) => {
              worker.once('exit', () => resolve());
              worker.postMessage({ t: 'stop' } satisfies ToWorker);
            }),
        ),
      ]);
      leaderServing = false;
      leaderPeers.close();
      await server.shutdown();
    },
  };
}
