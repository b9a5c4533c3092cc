import type { Logger } from '@cluster-dns/runtime';
import {
  CoreV1Api,
  DiscoveryV1Api,
  type KubeConfig,
  type KubernetesObject,
  makeInformer,
  type V1EndpointSlice,
  type V1Endpoints,
  type V1Pod,
  type V1Service,
} from '@kubernetes/client-node';
import type { ClusterState } from './cluster-state.js';
import { toEndpointGroup, toEndpointGroupFromEndpoints, toPodInfo, toServiceInfo } from './kube-objects.js';

export type ResourceName = 'services' | 'endpointslices' | 'endpoints' | 'pods';

/** What the informers watch for these options: the RBAC rules must cover exactly this. */
export function watchedResources(options: {
  endpointsApi: 'endpointslices' | 'endpoints';
  pods: string;
}): ResourceName[] {
  const resources: ResourceName[] = ['services', options.endpointsApi === 'endpoints' ? 'endpoints' : 'endpointslices'];
  if (options.pods === 'verified') resources.push('pods');
  return resources;
}

export interface WatchHooks {
  onSynced(resource: ResourceName): void;
  onError(resource: ResourceName, error: unknown): void;
  onRestart(resource: ResourceName): void;
  onEvent(resource: ResourceName, type: 'add' | 'update' | 'delete', durationNs: bigint): void;
}

export interface WatchOptions {
  kubeConfig: KubeConfig;
  state: ClusterState;
  resources: readonly ResourceName[];
  log: Logger;
  hooks: WatchHooks;
  /** Backoff between restarts of a failed informer: base, doubling to max. */
  restartBaseMs?: number;
  restartMaxMs?: number;
}

export interface Watchers {
  /** Starts every informer; resolves when each has made its first attempt to list. */
  start(): Promise<void>;
  isSynced(resource: ResourceName): boolean;
  allSynced(): boolean;
  stop(): Promise<void>;
}

type Apply<T> = { upsert(object: T): void; remove(object: T): void };

/**
 * client-node's informer keeps every object it has seen, only to notice deletions on a relist
 * (by name) and skip unchanged updates (by resourceVersion). Once an object has been turned into
 * our own small types, its bulky parts are dropped from that cache: at 100,000 endpoints this
 * halves the heap, and managedFields alone can be most of an object in a real cluster.
 */
function slim(object: KubernetesObject, fields: readonly string[]): void {
  const o = object as Record<string, unknown>;
  for (const f of fields) delete o[f];
  if (object.metadata) {
    delete object.metadata.managedFields;
    delete object.metadata.annotations;
  }
}

function handlers(state: ClusterState): { [K in ResourceName]: Apply<KubernetesObject> } {
  const meta = (o: KubernetesObject) => ({ ns: o.metadata?.namespace ?? '', name: o.metadata?.name ?? '' });
  return {
    services: {
      upsert: (o) => {
        const info = toServiceInfo(o as V1Service);
        if (info) state.upsertService(info);
        slim(o, ['spec', 'status']);
      },
      remove: (o) => state.deleteService(meta(o).ns, meta(o).name),
    },
    endpointslices: {
      upsert: (o) => {
        const group = toEndpointGroup(o as V1EndpointSlice);
        if (group) state.upsertGroup(group);
        else state.deleteGroup(meta(o).ns, meta(o).name);
        slim(o, ['endpoints', 'ports']);
      },
      remove: (o) => state.deleteGroup(meta(o).ns, meta(o).name),
    },
    endpoints: {
      upsert: (o) => {
        const group = toEndpointGroupFromEndpoints(o as V1Endpoints);
        if (group) state.upsertGroup(group);
        slim(o, ['subsets']);
      },
      remove: (o) => state.deleteGroup(meta(o).ns, meta(o).name),
    },
    pods: {
      upsert: (o) => {
        const pod = toPodInfo(o as V1Pod);
        if (pod) state.upsertPod(pod);
        slim(o, ['spec', 'status']);
      },
      remove: (o) => state.deletePod(meta(o).ns, meta(o).name),
    },
  };
}

/** A list call of the generated API client, for one page. */
type PageLister = (page: { limit: number; _continue?: string }) => Promise<{
  metadata?: { resourceVersion?: string; _continue?: string };
  items: KubernetesObject[];
}>;

/** Objects per list page: as client-go's reflector, so a large cluster is never one huge response. */
export const LIST_PAGE_SIZE = 500;

/**
 * Lists in pages and hands the informer one list with the first page's resourceVersion (every page
 * of one list carries it). Keeps the peak memory of the first sync of a large cluster down.
 */
function paged(list: PageLister) {
  return async () => {
    const first = await list({ limit: LIST_PAGE_SIZE });
    const items = [...first.items];
    let page = first;
    while (page.metadata?._continue) {
      page = await list({ limit: LIST_PAGE_SIZE, _continue: page.metadata._continue });
      items.push(...page.items);
    }
    return { ...first, items };
  };
}

function listerFor(resource: ResourceName, config: KubeConfig) {
  const core = config.makeApiClient(CoreV1Api);
  const discovery = config.makeApiClient(DiscoveryV1Api);
  switch (resource) {
    case 'services':
      return { path: '/api/v1/services', list: paged((p) => core.listServiceForAllNamespaces(p)) };
    case 'endpoints':
      return { path: '/api/v1/endpoints', list: paged((p) => core.listEndpointsForAllNamespaces(p)) };
    case 'pods':
      return { path: '/api/v1/pods', list: paged((p) => core.listPodForAllNamespaces(p)) };
    case 'endpointslices':
      return {
        path: '/apis/discovery.k8s.io/v1/endpointslices',
        list: paged((p) => discovery.listEndpointSliceForAllNamespaces(p)),
      };
  }
}

/**
 * One client-node informer per resource, feeding the cluster state. client-node stops an informer
 * on any error but 410; we restart it with capped backoff. A restart resumes the watch from the
 * last version, or re-lists; either way the state is updated in place, never emptied.
 */
export function createWatchers(options: WatchOptions): Watchers {
  const apply = handlers(options.state);
  const synced = new Set<ResourceName>();
  const stoppers: Array<() => Promise<void>> = [];
  const timers = new Set<NodeJS.Timeout>();
  let stopped = false;
  const base = options.restartBaseMs ?? 500;
  const max = options.restartMaxMs ?? 30_000;

  const startOne = async (resource: ResourceName) => {
    const { path, list } = listerFor(resource, options.kubeConfig);
    const informer = makeInformer<KubernetesObject>(options.kubeConfig, path, list as never);
    const log = options.log.child({ resource });
    const timed = (type: 'add' | 'update' | 'delete', fn: (o: KubernetesObject) => void) => (o: KubernetesObject) => {
      const t0 = process.hrtime.bigint();
      fn(o);
      options.hooks.onEvent(resource, type, process.hrtime.bigint() - t0);
    };
    informer.on('add', timed('add', apply[resource].upsert));
    informer.on('update', timed('update', apply[resource].upsert));
    informer.on('delete', timed('delete', apply[resource].remove));
    let failures = 0;
    let erroredDuringStart = false;
    let starting = false;
    const restart = () => {
      if (stopped) return;
      const delay = Math.min(max, base * 2 ** Math.min(failures, 16));
      const timer = setTimeout(async () => {
        timers.delete(timer);
        options.hooks.onRestart(resource);
        log.info('restarting watch', { attempt: failures });
        await attempt();
      }, delay);
      timer.unref();
      timers.add(timer);
    };
    informer.on('error', (error: unknown) => {
      failures++;
      options.hooks.onError(resource, error);
      log.warn('watch failed; serving the last known state', {
        err: error,
        synced: synced.has(resource),
        retryInMs: Math.min(max, base * 2 ** Math.min(failures, 16)),
      });
      if (starting) erroredDuringStart = true;
      else restart();
    });
    const attempt = async () => {
      starting = true;
      erroredDuringStart = false;
      try {
        await informer.start();
      } catch (error) {
        erroredDuringStart = true;
        options.hooks.onError(resource, error);
        log.warn('watch start failed', { err: error });
      }
      starting = false;
      const version = (informer as unknown as { latestResourceVersion(): string }).latestResourceVersion();
      if (erroredDuringStart || version === '') {
        restart();
        return;
      }
      failures = 0;
      if (!synced.has(resource)) {
        synced.add(resource);
        log.info('synced', { objects: informer.list().length });
      }
      options.hooks.onSynced(resource);
    };
    stoppers.push(() => informer.stop());
    await attempt();
  };

  return {
    start: async () => {
      await Promise.all(options.resources.map((r) => startOne(r)));
    },
    isSynced: (resource) => synced.has(resource),
    allSynced: () => options.resources.every((r) => synced.has(r)),
    stop: async () => {
      stopped = true;
      for (const t of timers) clearTimeout(t);
      await Promise.all(stoppers.map((s) => s()));
    },
  };
}
