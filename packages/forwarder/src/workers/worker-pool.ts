import { Buffer } from 'node:buffer';
import { Worker } from 'node:worker_threads';
import {
  type ClientLimits,
  ClusterDnsError,
  collectProcessMetrics,
  counterFrom,
  FlagError,
  gaugeFrom,
  type Logger,
  ServerCore,
} from '@cluster-dns/runtime';
import { type QueryContext, type Reply, reusePortSupported } from '@cluster-dns/wire';
import { AggregatorRegistry, type MetricObjectWithValues, type MetricValue, Registry } from 'prom-client';
import type { ForwarderOptions } from '../options.js';
import { type SharedAnswerStore, sharedStoreFor } from '../plugins/cache/shared-answer-store.js';
import { createForwarder, type Forwarder, type ForwarderDeps } from '../server/forwarder.js';
import { serverLabelOf } from '../server/metrics.js';
import { NamespaceTally, namespaceQueriesMetric } from '../server/namespace-tally.js';
import type { ForwarderStarted } from '../server/serving.js';
import { LANE_SCRIPT } from '../worker-script.js';
import { exactCopy, type FromLane, type LaneCounts, type LaneData, laneDataOf, type ToLane } from './lane.js';
import { laneMetrics } from './lane-metrics.js';

type MetricsJson = Array<MetricObjectWithValues<MetricValue<string>>>;

/** What worker 0, the main thread's forwarder, is built with: what it shares with the lanes. */
export interface LeaderShared {
  sharedCache: SharedAnswerStore;
  /** The hits the lanes answered, for its CHAOS statistics. */
  laneHits(): number;
  /** Called with the per-client limits whenever the ConfigMap changes them: the lanes take them too. */
  onLimits(limits: ClientLimits): void;
  /** Whether every query must take worker 0's chain (a Corefile `acl`): the lanes then answer no hit themselves. */
  setChainOnly(on: boolean): void;
  log: Logger;
}

/** The main thread's forwarder: worker 0, which also answers every query a lane hands it. */
export type LeaderFactory = (shared: LeaderShared) => Forwarder;

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

/** Worker 0 as the shells build it: the forwarder they would run alone, bound beside the lanes. */
export function forwarderLeader(options: ForwarderOptions, config?: ForwarderDeps['config']): LeaderFactory {
  return ({ sharedCache, laneHits, onLimits, setChainOnly, log }) =>
    createForwarder(
      { ...options, reusePort: true },
      { log, pooled: { worker: '0', laneHits, onLimits, setChainOnly }, sharedCache, ...(config ? { config } : {}) },
    );
}

/**
 * --workers=N: one process answering on N sockets of the DNS port, each bound with SO_REUSEPORT,
 * so the kernel spreads clients over them by address and port (node:cluster hands every worker
 * one shared UDP handle, and one worker then takes most datagrams). Worker 0 is this thread's
 * own forwarder (the shell's `leader`): the whole chain, the config, the zone sync. The other N − 1
 * are lanes (lane.ts), worker threads that answer the door's refusals and cache hits themselves
 * from the one cache every worker shares (shared-cache/, in memory made here, so a lane started
 * again finds it whole) and hand every other query to worker 0, whose reply they send. This
 * thread starts a lane again if one dies, tells the lanes of new per-client limits, and serves
 * /metrics, summed over worker 0 and the lanes.
 */
export function createWorkerPool(options: {
  options: ForwarderOptions;
  program: string;
  count: number;
  /** Where the summed /metrics is served (port 0: a free one). */
  metrics: { address: string; port: number; flags: string };
  /** Bind /metrics with SO_REUSEPORT too (node-local mode's handover). */
  reusePort: boolean;
  log: Logger;
  leader: LeaderFactory;
  /** The lane script (default: lane-worker.js beside the entries); tests give a stand-in. */
  workerScript?: URL;
}): WorkerPool {
  const { log, count } = options;
  const forwarderOptions = options.options;
  const lanes: Array<Worker | undefined> = new Array(count).fill(undefined);
  const metricsWaiters = new Map<number, (counts: LaneCounts) => void>();
  let nextId = 1;
  let stopping = false;
  let restarts = 0;
  let port = forwarderOptions.port;
  let limits = forwarderOptions.isolation.limits;
  /** Each lane's counters as last scraped: what a lane that died had counted (below). */
  const lastScraped: Array<MetricsJson | undefined> = new Array(count).fill(undefined);
  /**
   * The counters and histograms of lanes that died, as last scraped, summed in at every scrape
   * from then on: a restarted lane counts from 0, and without these the sum would fall, which
   * Prometheus reads as a counter reset. What a lane counted after the last scrape is lost.
   */
  const retired: MetricsJson[] = [];

  const sharedCache = sharedStoreFor(forwarderOptions);
  const cacheMemory = sharedCache.memory;
  const laneHits = new SharedArrayBuffer(8 * count);
  const chainOnlyMemory = new SharedArrayBuffer(4);
  const chainOnly = new Int32Array(chainOnlyMemory);
  const hitsOfLanes = new Float64Array(laneHits);
  const leader = options.leader({
    sharedCache,
    laneHits: () => hitsOfLanes.reduce((n, h) => n + h, 0),
    onLimits: (next) => {
      limits = next;
      for (const lane of lanes) lane?.postMessage({ t: 'limits', limits: next } satisfies ToLane);
    },
    setChainOnly: (on) => Atomics.store(chainOnly, 0, on ? 1 : 0),
    log: log.child({ worker: 0 }),
  });
  let leaderServing = false;

  const registry = new Registry();
  collectProcessMetrics(registry);
  gaugeFrom(registry, 'clusterdns_forwarder_workers', 'Worker threads serving now (--workers).', [], () => [
    [{}, lanes.filter(Boolean).length + (leaderServing ? 1 : 0)],
  ]);
  counterFrom(
    registry,
    'clusterdns_forwarder_worker_restarts_total',
    'Worker threads that died and were started again.',
    () => restarts,
  );

  /** A query a lane handed over: answered by worker 0's chain, its reply sent back to the lane. */
  const answer = async (lane: Worker, id: number, raw: Uint8Array, context: QueryContext) => {
    let reply: Reply;
    try {
      reply = await leader.handle(Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength), context);
    } catch (error) {
      log.debug('a query handed over by a lane failed', { err: error });
      reply = undefined;
    }
    const out = reply === undefined ? null : Buffer.isBuffer(reply) ? exactCopy(reply) : [...reply].map(exactCopy);
    const moved = out === null ? [] : Array.isArray(out) ? out.map((m) => m.buffer) : [out.buffer];
    lane.postMessage({ t: 'reply', id, reply: out } satisfies ToLane, moved);
  };

  const spawn = (index: number): Promise<void> =>
    new Promise((resolve, reject) => {
      const data: LaneData = laneDataOf(
        { ...forwarderOptions, isolation: { ...forwarderOptions.isolation, limits } },
        {
          program: options.program,
          index,
          logLevel: log.level,
          port,
          cacheMemory,
          laneHits,
          chainOnly: chainOnlyMemory,
        },
      );
      const lane = new Worker(options.workerScript ?? LANE_SCRIPT, { workerData: data });
      let ready = false;
      lane.on('message', (message: FromLane) => {
        if (message.t === 'query') void answer(lane, message.id, message.raw, message.context);
        else if (message.t === 'ready') {
          ready = true;
          lanes[index] = lane;
          resolve();
        } else if (message.t === 'failed') {
          const { code, message: text = 'worker failed to start' } = message.error;
          reject(
            code === 'DNS_BIND'
              ? new ClusterDnsError(code, text)
              : new ClusterDnsError('WORKER_FAILED', `worker ${index}: ${text}`),
          );
        } else if (message.t === 'metrics') {
          metricsWaiters.get(message.id)?.(message.counts);
        } else if (message.t === 'stopped') {
          // Drained; whatever handle is left (an unref'd timer) must not hold the process.
          void lane.terminate();
        }
      });
      lane.on('error', (error) => log.error('worker failed', { worker: index, err: error }));
      lane.on('exit', (code) => {
        if (lanes[index] === lane) lanes[index] = undefined;
        const last = lastScraped[index];
        lastScraped[index] = undefined;
        if (ready && last) retired.push(last.filter((m) => ['counter', 'histogram'].includes(String(m.type))));
        if (!ready)
          reject(new ClusterDnsError('WORKER_FAILED', `worker ${index} exited (${code}) before it was ready`));
        else if (!stopping) {
          // The kernel sends its clients to the others meanwhile; the cache is the process's.
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

  const serverLabel = () => serverLabelOf(forwarderOptions.listenAddresses, port);
  const shown = Array.from({ length: count }, (_, index) => laneMetrics(index, serverLabel));
  const metricsOf = (lane: Worker, index: number): Promise<MetricsJson | undefined> =>
    new Promise((resolve) => {
      const id = nextId++;
      const timer = setTimeout(() => {
        metricsWaiters.delete(id);
        resolve(undefined);
      }, 2_000);
      metricsWaiters.set(id, (counts) => {
        clearTimeout(timer);
        metricsWaiters.delete(id);
        laneClients[index] = { entries: counts.clients, overflow: counts.clientsOverflow };
        void (shown[index] as ReturnType<typeof laneMetrics>).json(counts).then(resolve);
      });
      lane.postMessage({ t: 'metrics', id } satisfies ToLane);
    });

  // Per namespace (--namespace-metrics): every worker's per-client counts, each lane's as it last
  // reported them (a lane that misses a scrape keeps its last, so nothing is counted twice).
  const laneClients: Array<{ entries: Array<[string, number]>; overflow: number } | undefined> = new Array(count).fill(
    undefined,
  );
  if (forwarderOptions.namespaceSeries > 0) {
    const namespaces = new NamespaceTally(forwarderOptions.namespaceSeries);
    namespaceQueriesMetric(registry, namespaces, () => {
      const all = [leader.clientTally(), ...laneClients.filter((c) => c !== undefined)];
      return namespaces.refresh(
        all.flatMap((c) => c.entries),
        all.reduce((n, c) => n + c.overflow, 0),
        leader.clientNamespace,
      );
    });
  }

  // The pool's /metrics on a server core: worker 0's own is not served.
  const server = new ServerCore({ log, lameduckMs: 0, lameduck: 'always' });
  return {
    async start() {
      let notifyPort: number | undefined;
      try {
        // Worker 0 first, so a port of 0 is picked once and the lanes bind beside it.
        const started = await leader.start();
        leaderServing = true;
        port = started.port;
        notifyPort = started.notifyPort;
        await Promise.all(Array.from({ length: count - 1 }, (_, i) => spawn(i + 1)));
      } catch (error) {
        stopping = true;
        await Promise.all(lanes.map((w) => w?.terminate()));
        if (leaderServing) await leader.shutdown();
        throw error;
      }
      const http = await server.listenHttp(
        'metrics',
        options.metrics.address,
        options.metrics.port,
        {
          '/metrics': async () => {
            const all = await Promise.all(
              lanes.map(async (w, index) => {
                const json = w && (await metricsOf(w, index));
                // A copy: a lane's series are made by one registry here, which the next scrape fills again.
                if (json && lanes[index] === w) lastScraped[index] = structuredClone(json);
                return json;
              }),
            );
            // Folded into one set: a lane dying over and over keeps no more than one set of counts.
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
        addresses: [...forwarderOptions.listenAddresses],
        metricsPort: http.port,
        ...(notifyPort !== undefined ? { notifyPort } : {}),
      };
      log.info('ready', { ...started, workers: count, reusePort: true });
      return started;
    },
    async shutdown() {
      stopping = true;
      // Worker 0 keeps answering what the lanes hand it until its own lameduck and drain end.
      await Promise.all([
        leader.shutdown(),
        ...lanes.map(
          (lane) =>
            lane &&
            new Promise<void>((resolve) => {
              lane.once('exit', () => resolve());
              lane.postMessage({ t: 'stop' } satisfies ToLane);
            }),
        ),
      ]);
      leaderServing = false;
      await server.shutdown();
    },
  };
}
