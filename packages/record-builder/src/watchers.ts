import type { Logger } from '@cluster-dns/runtime';
import type { V1EndpointSlice, V1Endpoints, V1Pod, V1Service } from '@kubernetes/client-node';
import type { ApiClient } from './api-client.js';
import type { ClusterState } from './cluster-state.js';
import { toEndpointGroup, toEndpointGroupFromEndpoints, toPodInfo, toServiceInfo } from './kube-objects.js';
import { createReflector, type ObjectSink, type Reflector } from './reflector.js';

export type ResourceName = 'services' | 'endpointslices' | 'endpoints' | 'pods';

/** What the reflectors watch for these options: the RBAC rules must cover exactly this. */
export function watchedResources(options: {
  endpointsApi: 'endpointslices' | 'endpoints';
  pods: string;
}): ResourceName[] {
  const resources: ResourceName[] = ['services', options.endpointsApi === 'endpoints' ? 'endpoints' : 'endpointslices'];
  if (options.pods === 'verified') resources.push('pods');
  return resources;
}

const PATHS: Record<ResourceName, string> = {
  services: '/api/v1/services',
  endpoints: '/api/v1/endpoints',
  pods: '/api/v1/pods',
  endpointslices: '/apis/discovery.k8s.io/v1/endpointslices',
};

export interface WatchHooks {
  /** The resource's watch is open: its data is current. */
  onWatching(resource: ResourceName): void;
  onError(resource: ResourceName, error: unknown): void;
  onRelist(resource: ResourceName, reason: string): void;
  onEvent(resource: ResourceName, type: 'add' | 'update' | 'delete', durationNs: bigint): void;
}

export interface WatchOptions {
  api: ApiClient;
  state: ClusterState;
  resources: readonly ResourceName[];
  log: Logger;
  hooks: WatchHooks;
  /** Backoff between failed attempts: base, doubling to max. */
  restartBaseMs?: number;
  restartMaxMs?: number;
}

export interface Watchers {
  /** Starts every reflector in the background. */
  start(): void;
  isSynced(resource: ResourceName): boolean;
  allSynced(): boolean;
  stop(): void;
}

/** Objects per list page: as client-go's reflector, so a large cluster is never one huge response. */
export const LIST_PAGE_SIZE = 500;

/** Each resource's objects turned into the small internal types, into the cluster state. */
function sinkFor(resource: ResourceName, state: ClusterState): ObjectSink {
  switch (resource) {
    case 'services':
      return {
        upsert: (o) => {
          const info = toServiceInfo(o as V1Service);
          if (info) state.upsertService(info);
        },
        remove: (ns, name) => state.deleteService(ns, name),
      };
    case 'endpointslices':
      return {
        upsert: (o) => {
          const group = toEndpointGroup(o as V1EndpointSlice);
          if (group) state.upsertGroup(group);
          else state.deleteGroup(o.metadata?.namespace ?? '', o.metadata?.name ?? '');
        },
        remove: (ns, name) => state.deleteGroup(ns, name),
      };
    case 'endpoints':
      return {
        upsert: (o) => {
          const group = toEndpointGroupFromEndpoints(o as V1Endpoints);
          if (group) state.upsertGroup(group);
        },
        remove: (ns, name) => state.deleteGroup(ns, name),
      };
    case 'pods':
      return {
        upsert: (o) => {
          const pod = toPodInfo(o as V1Pod);
          if (pod) state.upsertPod(pod);
        },
        remove: (ns, name) => state.deletePod(ns, name),
      };
  }
}

/**
 * One reflector per resource, feeding the cluster state. Kubernetes objects stop here: the state
 * only ever sees ServiceInfo, EndpointGroup and PodInfo, and no copy of an API object is kept.
 */
export function createWatchers(options: WatchOptions): Watchers {
  const reflectors = new Map<ResourceName, Reflector>();
  for (const resource of options.resources) {
    reflectors.set(
      resource,
      createReflector({
        api: options.api,
        path: PATHS[resource],
        sink: sinkFor(resource, options.state),
        log: options.log.child({ resource }),
        pageSize: LIST_PAGE_SIZE,
        retryBaseMs: options.restartBaseMs ?? 500,
        retryMaxMs: options.restartMaxMs ?? 30_000,
        hooks: {
          onWatching: () => options.hooks.onWatching(resource),
          onError: (error) => options.hooks.onError(resource, error),
          onRelist: (reason) => options.hooks.onRelist(resource, reason),
          onEvent: (type, ns) => options.hooks.onEvent(resource, type, ns),
        },
      }),
    );
  }
  return {
    start: () => {
      for (const r of reflectors.values()) r.start();
    },
    isSynced: (resource) => reflectors.get(resource)?.synced ?? false,
    allSynced: () => [...reflectors.values()].every((r) => r.synced),
    stop: () => {
      for (const r of reflectors.values()) r.stop();
    },
  };
}
