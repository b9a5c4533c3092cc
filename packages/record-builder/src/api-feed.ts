import { performance } from 'node:perf_hooks';
import { Worker } from 'node:worker_threads';
import type { Logger } from '@cluster-dns/runtime';
import type { ProgrammedChange } from '@cluster-dns/wire';
import type { FeedMarker, FeedUpdate, ResourceName, WorkerConfig, WorkerMessage } from './api-feed-protocol.js';
import type { EndpointGroup, NodeCacheInfo, PodInfo, ServiceCidrInfo, ServiceInfo } from './cluster-model.js';
import type { ClusterState } from './cluster-state.js';
import { KubeConfigError } from './kube-config-source.js';

export interface ApiFeedHooks {
  onWatching(resource: ResourceName): void;
  onError(resource: ResourceName): void;
  onRelist(resource: ResourceName, reason: string): void;
  /** One update applied: how long it took here, and how long since the worker read it. */
  onApplied(resource: ResourceName, durationNs: bigint, delayMs: number): void;
  /** An EndpointSlice change with a new last-change-trigger-time is in the answers (the SLI). */
  onProgrammed(change: ProgrammedChange): void;
}

export interface ApiFeedOptions {
  state: ClusterState;
  worker: Omit<WorkerConfig, 'known'>;
  log: Logger;
  hooks: ApiFeedHooks;
  /** How long a slice of updates may hold the main thread before queries get their turn. */
  budgetMs?: number;
  /** Where the node caches' pods go (the `node-caches` resource): not DNS records, NOTIFY targets. */
  nodeCaches?: {
    upsert(info: NodeCacheInfo): void;
    remove(namespace: string, name: string): void;
    keys(): string[];
  };
}

export interface ApiFeed {
  /** Starts the API worker; resolves once it has loaded the kubeconfig (rejects if it cannot). */
  start(): Promise<{ from: string; server: string }>;
  isSynced(resource: ResourceName): boolean;
  allSynced(): boolean;
  /** Resolves the moment every resource's first list has been applied. */
  whenSynced(): Promise<void>;
  /** Updates read from the API and not yet applied (in the worker and here). */
  backlog(): number;
  /** Age of the oldest of those, in ms (0 when none). */
  lagMs(nowMs: number): number;
  /** Events replaced by a later state of their object before being applied. */
  coalesced(): number;
  /** The API worker's V8 heap as it last reported it (zeros before its first report). */
  workerHeap(): { heapUsed: number; heapTotal: number };
  /** Runs a full GC in the worker (full-gc.ts) and gives its heap after it. */
  gc(): Promise<{ heapUsed: number; heapTotal: number }>;
  stop(): Promise<void>;
}

/**
 * The main thread's end of the API worker (api-worker.ts): applies the updates it sends to the
 * store in slices of `budgetMs`, between which queries are answered, then asks for the next batch.
 * A worker that dies is started again; it relists, and drops what is gone meanwhile.
 */
export function createApiFeed(options: ApiFeedOptions): ApiFeed {
  const { state, log, hooks } = options;
  const budgetMs = options.budgetMs ?? 2;
  const synced = new Set<ResourceName>();
  const allSynced = () => options.worker.resources.every((r) => synced.has(r));
  let markSynced: () => void = () => {};
  const whenSynced = new Promise<void>((resolve) => {
    markSynced = resolve;
  });
  let worker: Worker | undefined;
  let stopping = false;
  let restarts = 0;
  let queue: readonly FeedUpdate[] = [];
  let position = 0;
  let markers: readonly FeedMarker[] = [];
  let workerPending = 0;
  let workerOldestMs = 0;
  let coalesced = 0;
  let workerHeap = { heapUsed: 0, heapTotal: 0 };
  const gcWaiters: Array<(heap: { heapUsed: number; heapTotal: number }) => void> = [];

  const apply = (u: FeedUpdate) => {
    const t0 = process.hrtime.bigint();
    if (u.resource === 'node-caches') {
      if (u.value) options.nodeCaches?.upsert(u.value as NodeCacheInfo);
      else options.nodeCaches?.remove(u.namespace, u.name);
    } else {
      const programmed = applyUpdate(state, u, synced.has(u.resource));
      if (programmed) hooks.onProgrammed(programmed);
    }
    hooks.onApplied(u.resource, process.hrtime.bigint() - t0, Date.now() - u.readAtMs);
  };

  const marker = (m: FeedMarker) => {
    if (m.kind === 'synced') {
      synced.add(m.resource);
      if (allSynced()) markSynced();
    } else if (m.kind === 'progress') applyProgress(state, m);
    else if (m.kind === 'watching') hooks.onWatching(m.resource);
    else if (m.kind === 'error') hooks.onError(m.resource);
    else hooks.onRelist(m.resource, m.reason);
  };

  const drain = () => {
    const deadline = performance.now() + budgetMs;
    while (position < queue.length) {
      apply(queue[position++] as FeedUpdate);
      if (position < queue.length && performance.now() > deadline) {
        setImmediate(drain);
        return;
      }
    }
    for (const m of markers) marker(m);
    queue = [];
    markers = [];
    position = 0;
    worker?.postMessage({ type: 'ack' });
  };

  const known = (): WorkerConfig['known'] => ({
    services: state.serviceKeys(),
    serviceimports: state.importKeys(),
    endpointslices: state.groupKeys(),
    endpoints: state.groupKeys(),
    pods: state.podKeys(),
    'node-caches': options.nodeCaches?.keys() ?? [],
    servicecidrs: state.serviceCidrKeys(),
  });

  const spawn = () =>
    new Promise<{ from: string; server: string }>((resolve, reject) => {
      const config: WorkerConfig = { ...options.worker, known: restarts > 0 ? known() : {} };
      const w = new Worker(new URL('./api-worker.js', import.meta.url), { workerData: config });
      worker = w;
      let configured = false;
      w.on('message', (message: WorkerMessage) => {
        if (message.type === 'configured') {
          configured = true;
          resolve({ from: message.from, server: message.server });
        } else if (message.type === 'fatal') {
          reject(new KubeConfigError(message.message, { hint: message.hint }));
        } else if (message.type === 'heap') {
          workerHeap = { heapUsed: message.heapUsed, heapTotal: message.heapTotal };
        } else if (message.type === 'gc-done') {
          for (const w of gcWaiters.splice(0)) w({ heapUsed: message.heapUsed, heapTotal: message.heapTotal });
        } else {
          queue = message.updates;
          markers = message.markers;
          position = 0;
          workerPending = message.pending;
          workerOldestMs = message.oldestPendingMs;
          coalesced = message.coalesced;
          drain();
        }
      });
      w.on('error', (error) => log.error('API worker failed', { err: error }));
      w.on('exit', (code) => {
        if (worker === w) worker = undefined;
        if (stopping) return;
        if (!configured) {
          reject(new KubeConfigError(`the API worker exited with ${code} before it was configured`));
          return;
        }
        // Its store stays served; a new worker lists again and drops what is gone.
        const delayMs = Math.min(30_000, 500 * 2 ** Math.min(restarts++, 6));
        log.error('API worker exited; starting a new one', { code, delayMs });
        setTimeout(() => {
          if (!stopping) spawn().catch((error) => log.error('API worker restart failed', { err: error }));
        }, delayMs).unref();
      });
    });

  return {
    start: spawn,
    isSynced: (resource) => synced.has(resource),
    allSynced,
    whenSynced: () => whenSynced,
    backlog: () => workerPending + (queue.length - position),
    lagMs: (nowMs) => {
      const oldestHere = position < queue.length ? (queue[position] as FeedUpdate).readAtMs : 0;
      const oldest = [oldestHere, workerPending > 0 ? workerOldestMs : 0].filter((t) => t > 0);
      return oldest.length ? Math.max(0, nowMs - Math.min(...oldest)) : 0;
    },
    coalesced: () => coalesced,
    workerHeap: () => workerHeap,
    gc: () =>
      new Promise((resolve) => {
        if (!worker) return resolve({ heapUsed: 0, heapTotal: 0 });
        gcWaiters.push(resolve);
        worker.postMessage({ type: 'gc' });
      }),
    stop: async () => {
      stopping = true;
      await worker?.terminate();
    },
  };
}

/**
 * One update from the API worker into the store, tagged with the change it came from (the journal
 * and the clock take it). `timed`: the resource's first list is applied, so a new trigger time is
 * a change being programmed now. Returns that change, for the SLI.
 */
export function applyUpdate(state: ClusterState, u: FeedUpdate, timed: boolean): ProgrammedChange | undefined {
  state.changeAt =
    u.version === undefined
      ? undefined
      : {
          resource: u.resource,
          key: `${u.namespace}/${u.name}`,
          version: u.version,
          firstVersion: u.firstVersion ?? u.version,
        };
  let programmed: ProgrammedChange | undefined;
  switch (u.resource) {
    case 'services':
      if (u.value) state.upsertService(u.value as ServiceInfo);
      else state.deleteService(u.namespace, u.name);
      break;
    case 'serviceimports':
      if (u.value) state.upsertService(u.value as ServiceInfo);
      else state.deleteImport(u.namespace, u.name);
      break;
    case 'endpointslices':
    case 'endpoints': {
      const group = u.value as EndpointGroup | null;
      if (group) programmed = state.upsertGroup(group, timed);
      else state.deleteGroup(u.namespace, u.name);
      break;
    }
    case 'pods':
      if (u.value) state.upsertPod(u.value as PodInfo);
      else state.deletePod(u.namespace, u.name);
      break;
    case 'servicecidrs':
      if (u.value) state.upsertServiceCidr(u.value as ServiceCidrInfo);
      else state.deleteServiceCidr(u.name);
      break;
    case 'node-caches':
      break;
  }
  state.changeAt = undefined;
  return programmed;
}

/** The worker's word that a resource's changes up to a version are all applied. */
export function applyProgress(state: ClusterState, m: Extract<FeedMarker, { kind: 'progress' }>): void {
  state.clock.progressed(m.resource, m.version, m.fingerprint, m.listed);
}
