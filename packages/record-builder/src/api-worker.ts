/**
 * The API worker (a worker_threads thread of the record-builder): lists and watches the API,
 * parses the JSON, turns objects into the compact internal types, and sends the latest state of
 * each changed object to the main thread in batches. None of this runs on the thread that answers
 * DNS, and its memory churn (whole API objects, tens of MB/s at churn) stays in this heap.
 *
 * Bounded at any event rate: updates wait in a map keyed by object, so a burst of changes to one
 * object is one update (the latest state wins), and at most one batch is in flight until the main
 * thread acknowledges it. The map holds at most one entry per object in the cluster; the watch
 * stream is read only as fast as this thread parses it, so it is never buffered here either.
 */
import { readlinkSync } from 'node:fs';
import { setPriority } from 'node:os';
import { getHeapStatistics } from 'node:v8';
import { parentPort, workerData } from 'node:worker_threads';
import { createLogger } from '@cluster-dns/runtime';
import { resourceVersionNumber } from '@cluster-dns/wire';
import type { KubernetesObject, V1EndpointSlice, V1Endpoints, V1Pod, V1Service } from '@kubernetes/client-node';
import { createApiClient } from './api-client.js';
import type {
  FeedMarker,
  FeedUpdate,
  MainMessage,
  ResourceName,
  WorkerConfig,
  WorkerMessage,
} from './api-feed-protocol.js';
import { fullGc } from './full-gc.js';
import { loadKubeConfig } from './kube-config.js';
import {
  type ServiceCidrObject,
  type ServiceImportObject,
  toEndpointGroup,
  toEndpointGroupFromEndpoints,
  toNodeCacheInfo,
  toPodInfo,
  toServiceCidrInfo,
  toServiceImportInfo,
  toServiceInfo,
} from './kube-objects.js';
import { createReflector, type ObjectSink } from './reflector.js';
import { UpdateQueue } from './update-queue.js';

const config = workerData as WorkerConfig;
/** The worker's nice value: CFS then gives the answering thread ~9× its share when both want the CPU. */
const WORKER_NICE = 10;
const port = parentPort;
if (!port) throw new Error('api-worker.js runs as a worker thread of the record-builder');
const post = (message: WorkerMessage) => port.postMessage(message);
const log = createLogger({ component: 'record-builder', level: config.logLevel }).child({ thread: 'api' });

// Answering DNS comes first: on a busy core the scheduler runs the main thread before this one.
try {
  const tid = Number(readlinkSync('/proc/thread-self').split('/').at(-1));
  setPriority(tid, WORKER_NICE);
  log.debug('API worker priority lowered', { tid, nice: WORKER_NICE });
} catch (error) {
  // Not Linux, or not allowed: equal priority is still correct, only less kind to queries.
  log.info('API worker runs at normal priority', { err: error });
}

const nodeCaches = config.nodeCaches;
const PATHS: Record<ResourceName, string> = {
  services: '/api/v1/services',
  endpoints: '/api/v1/endpoints',
  pods: '/api/v1/pods',
  endpointslices: '/apis/discovery.k8s.io/v1/endpointslices',
  serviceimports: '/apis/multicluster.x-k8s.io/v1alpha1/serviceimports',
  servicecidrs: '/apis/networking.k8s.io/v1/servicecidrs',
  // One namespace, one label selector: a few thousand small objects at most, even on a large cluster.
  'node-caches': nodeCaches
    ? `/api/v1/namespaces/${encodeURIComponent(nodeCaches.namespace)}/pods?labelSelector=${encodeURIComponent(nodeCaches.labelSelector)}`
    : '',
};

/** Each resource's API objects as the main thread's types; null when DNS has nothing from it. */
function toValue(resource: ResourceName, o: KubernetesObject): FeedUpdate['value'] {
  switch (resource) {
    case 'services':
      return toServiceInfo(o as V1Service) ?? null;
    case 'endpointslices':
      return (
        toEndpointGroup(o as V1EndpointSlice, {
          podNames: config.endpointPodNames,
          multicluster: config.multicluster,
        }) ?? null
      );
    case 'serviceimports':
      return toServiceImportInfo(o as ServiceImportObject) ?? null;
    case 'endpoints':
      return toEndpointGroupFromEndpoints(o as V1Endpoints) ?? null;
    case 'pods':
      return toPodInfo(o as V1Pod) ?? null;
    case 'node-caches':
      return toNodeCacheInfo(o as V1Pod) ?? null;
    case 'servicecidrs':
      return toServiceCidrInfo(o as ServiceCidrObject) ?? null;
  }
}

const queue = new UpdateQueue();
let inFlight = false;
let flushScheduled = false;

const enqueue = (update: FeedUpdate) => {
  queue.push(update);
  scheduleFlush();
};
const mark = (marker: FeedMarker) => {
  queue.mark(marker);
  scheduleFlush();
};

function scheduleFlush(): void {
  if (flushScheduled || inFlight) return;
  flushScheduled = true;
  // After the rest of this chunk of the stream: one batch for many lines.
  setImmediate(flush);
}

/** One batch to the main thread; the next waits for its ack (flow control). */
function flush(): void {
  flushScheduled = false;
  if (inFlight || queue.isEmpty) return;
  inFlight = true;
  post({ type: 'batch', ...queue.take(config.maxBatch), coalesced: queue.coalesced });
}

/** How often the worker tells the main thread its heap (the metrics' view of this thread). */
const HEAP_REPORT_MS = 2000;
setInterval(() => {
  const heap = getHeapStatistics();
  post({ type: 'heap', heapUsed: heap.used_heap_size, heapTotal: heap.total_heap_size });
}, HEAP_REPORT_MS).unref();

port.on('message', (message: MainMessage) => {
  if (message.type === 'gc') {
    fullGc();
    const { heapUsed, heapTotal } = process.memoryUsage();
    post({ type: 'gc-done', heapUsed, heapTotal });
    return;
  }
  inFlight = false;
  scheduleFlush();
});

let kube: ReturnType<typeof loadKubeConfig>;
try {
  kube = loadKubeConfig(config.kube);
} catch (error) {
  const e = error as { message: string; code?: string; hint?: string };
  post({ type: 'fatal', message: e.message, code: e.code ?? 'KUBECONFIG_INVALID', hint: e.hint });
  throw error;
}
post({ type: 'configured', from: kube.from, server: kube.config.getCurrentCluster()?.server ?? '' });

const api = createApiClient(kube.config);
for (const resource of config.resources) {
  const sink: ObjectSink = {
    upsert: (o) => {
      const namespace = o.metadata?.namespace ?? '';
      const name = o.metadata?.name ?? '';
      const version = resourceVersionNumber(o.metadata?.resourceVersion);
      enqueue({ resource, namespace, name, value: toValue(resource, o), readAtMs: Date.now(), version });
    },
    remove: (namespace, name, resourceVersion) =>
      enqueue({
        resource,
        namespace,
        name,
        value: null,
        readAtMs: Date.now(),
        version: resourceVersionNumber(resourceVersion),
      }),
  };
  const reflector = createReflector({
    api,
    path: PATHS[resource],
    sink,
    log: log.child({ resource }),
    pageSize: config.pageSize,
    retryBaseMs: config.retryBaseMs,
    retryMaxMs: config.retryMaxMs,
    initialKnown: config.known[resource] ?? [],
    // A cluster before 1.33 has no ServiceCIDRs, and an older ClusterRole may not grant them:
    // DNS starts without their zones (saying so) rather than never becoming ready.
    optional:
      resource === 'servicecidrs'
        ? 'the reverse zones of Service CIDRs are not answered as the cluster’s: grant list/watch on servicecidrs (networking.k8s.io), or pass --service-cidr'
        : undefined,
    hooks: {
      onWatching: () => mark({ kind: 'watching', resource }),
      onSynced: (objects) => mark({ kind: 'synced', resource, objects }),
      onError: () => mark({ kind: 'error', resource }),
      onRelist: (reason) => mark({ kind: 'relist', resource, reason }),
      onEvent: () => {},
      onProgress: (resourceVersion, fingerprint, listed) => {
        // Opaque versions (an API before KEP-5504): no position, and IXFR goes by serial alone.
        const version = resourceVersionNumber(resourceVersion);
        if (version === undefined) return;
        queue.progress(resource, version, fingerprint, listed);
        scheduleFlush();
      },
    },
  });
  reflector.start();
}
