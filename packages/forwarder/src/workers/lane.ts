import { Buffer } from 'node:buffer';
import { performance } from 'node:perf_hooks';
import { parentPort, workerData } from 'node:worker_threads';
import {
  type ClientLimits,
  createLogger,
  describeError,
  type HistogramSnapshot,
  type Logger,
  type LogLevel,
  ServerCore,
} from '@cluster-dns/runtime';
import type { Cidr, DnsListener, Fqdn, QueryContext, Reply } from '@cluster-dns/wire';
import type { ClientDoorCounts } from '../isolation/client-door.js';
import { ClientDoor } from '../isolation/client-door.js';
import { ClientTally } from '../isolation/client-tally.js';
import { clusterZoneOf, type ForwarderOptions, type ListenerSettings, listenerSettingsOf } from '../options.js';
import { type AutopathSettings, chainFirst } from '../plugins/autopath/search-path.js';
import { monotonicMs } from '../plugins/cache/cache.js';
import { CacheStage } from '../plugins/cache/cache-stage.js';
import { SharedAnswerStore } from '../plugins/cache/shared-answer-store.js';
import { createHitLane } from '../server/hit-lane.js';
import { type ListenerTcpCounts, serverLabelOf, shedOf, tcpCountsOf } from '../server/metrics.js';
import { ServerQueryCounts } from '../server/query-counts.js';

/**
 * What a lane is started with (structured-cloned: plain data, the shared memory by reference):
 * the listeners' settings of the process's forwarder, and the cache's memory.
 */
export interface LaneData {
  program: string;
  index: number;
  logLevel: LogLevel;
  addresses: readonly string[];
  port: number;
  cacheMemory: SharedArrayBuffer;
  /** One float64 per worker: the hits each lane answered, which the main thread's CHAOS statistics add. */
  laneHits: SharedArrayBuffer;
  /** One int32, 1 while every query must take worker 0's chain (a Corefile `acl`): no hit is answered here then. */
  chainOnly: SharedArrayBuffer;
  maxStaleSeconds: number;
  prefetchHits: number;
  ednsPacketMax: number;
  logQueries: boolean;
  limits: ClientLimits;
  trustClientAddressFrom: readonly Cidr[];
  lameduckMs: number;
  /** The DNS port's sockets, bound as worker 0 binds its own (options.ts's listenerSettingsOf). */
  listener: ListenerSettings;
  /** --autopath: a cached NXDOMAIN that may be a walk's first step goes to worker 0, which walks. */
  autopath?: AutopathSettings;
  /** The cluster zone: a question for its client map goes to worker 0, which answers it only to whom it may. */
  clusterZone: Fqdn;
  /** --namespace-metrics above 0: the lane's door counts queries per client, for the pool's per-namespace series. */
  tallyClients: boolean;
}

/** A lane's data from the forwarder's options (worker-pool.ts builds it for each lane). */
export function laneDataOf(
  options: ForwarderOptions,
  shared: {
    program: string;
    index: number;
    logLevel: LogLevel;
    port: number;
    cacheMemory: SharedArrayBuffer;
    laneHits: SharedArrayBuffer;
    chainOnly: SharedArrayBuffer;
  },
): LaneData {
  return {
    ...shared,
    addresses: options.listenAddresses,
    maxStaleSeconds: options.maxStaleSeconds,
    prefetchHits: options.prefetchHits,
    ednsPacketMax: options.ednsPacketMax,
    logQueries: options.logQueries,
    limits: options.isolation.limits,
    trustClientAddressFrom: options.isolation.trustClientAddressFrom,
    lameduckMs: options.lameduckMs,
    listener: listenerSettingsOf(options),
    ...(options.autopath ? { autopath: options.autopath } : {}),
    tallyClients: options.namespaceSeries > 0,
    clusterZone: clusterZoneOf(options),
  };
}

/** The main thread's messages to a lane, and a lane's to it. */
export type ToLane =
  | { t: 'reply'; id: number; reply: Uint8Array | Uint8Array[] | null }
  | { t: 'limits'; limits: ClientLimits }
  | { t: 'metrics'; id: number }
  | { t: 'stop' };
export type FromLane =
  | { t: 'ready'; port: number }
  | { t: 'failed'; error: { message?: string; code?: string } }
  | { t: 'query'; id: number; raw: Uint8Array; context: QueryContext }
  | { t: 'metrics'; id: number; counts: LaneCounts }
  | { t: 'stopped' };

/**
 * What a lane counted, as plain data: the pool shows it through the same series as a forwarder's
 * (metrics.ts's createListenerMetrics), so a lane loads no metrics library of its own.
 */
export interface LaneCounts {
  hits: number;
  denialHits: number;
  door: ClientDoorCounts;
  trackedClients: number;
  shed: number;
  tcp: ListenerTcpCounts;
  requests: Array<[Record<string, string>, number]>;
  responses: Array<[Record<string, string>, number]>;
  duration: HistogramSnapshot;
  /** Queries per client since the lane started (--namespace-metrics), and those past the bound. */
  clients: Array<[string, number]>;
  clientsOverflow: number;
}

/**
 * One lane of --workers, in a worker thread: it binds the DNS port beside the main thread's
 * forwarder (SO_REUSEPORT), and answers what a lane can without anything else: the door's
 * per-client limits, and cache hits from the process's shared cache (the express lane). Every
 * other query (a miss, TCP, NOTIFY, CHAOS…) goes to the main thread's forwarder as it came, with
 * its client's address, and its reply comes back to be sent from here. So a lane loads the
 * listener, the door, the hit lane and the store, and none of the chain, the config or the zone
 * sync: a thread of its own costs what those hold (bench case 11).
 */
export async function serveAsLane(): Promise<void> {
  const port = parentPort;
  if (!port) throw new Error('a lane runs as a worker thread of the forwarder');
  const data = workerData as LaneData;
  const log: Logger = createLogger({ component: data.program, level: data.logLevel }).child({ worker: data.index });
  try {
    const store = new SharedAnswerStore(data.cacheMemory, monotonicMs, data.maxStaleSeconds);
    const cacheStage = new CacheStage({
      cache: store,
      // A lane only serves hits (hitAtOnce): what is kept, and when, is the main thread's business.
      policy: { negativeCache: true, negTtlSeconds: 0, minCacheTtlSeconds: 0, maxCacheTtlSeconds: 0 },
      staleAllowed: () => false,
      prefetchHits: data.prefetchHits,
      log,
      logQueries: false,
      now: monotonicMs,
    });
    const tally = data.tallyClients ? new ClientTally() : undefined;
    const door = new ClientDoor(
      data.limits,
      data.ednsPacketMax,
      () => performance.now(),
      data.trustClientAddressFrom,
      tally,
    );
    const server = new ServerCore({ log, lameduckMs: data.lameduckMs, lameduck: 'always' });
    const listeners: DnsListener[] = [];
    const serverLabel = () => serverLabelOf(data.addresses, data.port);
    const queries = new ServerQueryCounts(() => ({ server: serverLabel(), zone: '.' }));
    const hits = new Float64Array(data.laneHits);
    const chainOnly = new Int32Array(data.chainOnly);
    const hitLane = createHitLane({
      cacheStage,
      queries,
      udpPayloadBytes: data.ednsPacketMax,
      bypass: () => Atomics.load(chainOnly, 0) !== 0,
      leaveToChain: chainFirst(data.clusterZone, data.autopath),
    });
    // Logging every query needs the whole way: the lane then answers nothing itself.
    const express = data.logQueries
      ? undefined
      : (raw: Parameters<typeof hitLane>[0], family: 4 | 6, remoteAddress: string) => {
          const reply = hitLane(raw, family, remoteAddress);
          if (reply !== undefined) hits[data.index] = cacheStage.counts.hits;
          return reply;
        };

    let nextId = 1;
    const waiting = new Map<number, (reply: Reply) => void>();
    const handler = (raw: Buffer, context: QueryContext): Promise<Reply> =>
      new Promise((resolve) => {
        const id = nextId++;
        waiting.set(id, resolve);
        const own = exactCopy(raw);
        port.postMessage({ t: 'query', id, raw: own, context } satisfies FromLane, [own.buffer]);
      });

    const counts = (): LaneCounts => ({
      clients: tally?.entries() ?? [],
      clientsOverflow: tally?.overflow ?? 0,
      hits: cacheStage.counts.hits,
      denialHits: cacheStage.counts.denialHits,
      door: { ...door.counts },
      trackedClients: door.trackedClients(),
      shed: shedOf(listeners),
      tcp: tcpCountsOf(listeners),
      requests: queries.requests.entries(),
      responses: queries.responses.entries(),
      duration: queries.duration.snapshot(),
    });

    port.on('message', (message: ToLane) => {
      if (message.t === 'reply') {
        const resolve = waiting.get(message.id);
        waiting.delete(message.id);
        const { reply } = message;
        resolve?.(
          reply === null
            ? undefined
            : Array.isArray(reply)
              ? reply.map((m) => Buffer.from(m.buffer, m.byteOffset, m.byteLength))
              : Buffer.from(reply.buffer, reply.byteOffset, reply.byteLength),
        );
      } else if (message.t === 'limits') door.setLimits(message.limits);
      else if (message.t === 'metrics')
        port.postMessage({ t: 'metrics', id: message.id, counts: counts() } satisfies FromLane);
      else if (message.t === 'stop')
        void server.shutdown().then(() => {
          port.postMessage({ t: 'stopped' } satisfies FromLane);
          port.close();
        });
    });

    for (const host of data.addresses) {
      listeners.push(
        await server.listenDns(
          `dns ${host}`,
          {
            ...data.listener.listen,
            host,
            port: data.port,
            handler,
            ...(express ? { express } : {}),
            door,
            reusePort: true,
            onHandlerError: (error) => log.debug('send failed', { err: error }),
          },
          data.listener.drainMs,
        ),
      );
    }
    log.info('worker ready', { port: data.port, addresses: data.addresses });
    port.postMessage({ t: 'ready', port: data.port } satisfies FromLane);
  } catch (error) {
    port.postMessage({ t: 'failed', error: describeError(error) } satisfies FromLane);
    port.close();
  }
}

/**
 * The octets of a message in an ArrayBuffer of their own, to be moved (not copied) to another
 * thread. Posting a view clones the whole buffer behind it: a TCP chunk or Node's 8 KiB pool for
 * every message (measured: 250 MiB more under a pipelining flood).
 */
export function exactCopy(message: Uint8Array): Uint8Array<ArrayBuffer> {
  return Uint8Array.prototype.slice.call(message) as Uint8Array<ArrayBuffer>;
}
