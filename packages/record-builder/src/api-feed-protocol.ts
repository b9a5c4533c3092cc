import type { StateFingerprint } from '@cluster-dns/wire';
import type { EndpointGroup, NodeCacheInfo, PodInfo, ServiceCidrInfo, ServiceInfo } from './cluster-model.js';
import type { KubeConfigSource } from './kube-config-source.js';

/**
 * What the reflectors watch. `node-caches`: the node-local DaemonSet's pods (--node-cache-selector);
 * `serviceimports`: the Multi-Cluster Services API's imports (--multicluster-zone); `servicecidrs`:
 * the cluster's Service CIDRs (networking.k8s.io/v1), whose reverse zones are ours.
 */
export type ResourceName =
  | 'services'
  | 'endpointslices'
  | 'endpoints'
  | 'pods'
  | 'node-caches'
  | 'serviceimports'
  | 'servicecidrs';

/** The latest state of one object: null when it was deleted. */
export interface FeedUpdate {
  readonly resource: ResourceName;
  readonly namespace: string;
  readonly name: string;
  readonly value: ServiceInfo | EndpointGroup | PodInfo | NodeCacheInfo | ServiceCidrInfo | null;
  /** When the API worker read it off the watch or list (ms since epoch). */
  readonly readAtMs: number;
  /**
   * The resourceVersion of the change (a deletion's own, or the list's that no longer had it), and
   * of the first change folded into this update when several were (the latest state wins):
   * absent when the API's versions are not integers (cluster-clock.ts).
   */
  readonly version?: number;
  readonly firstVersion?: number;
}

/** Facts about a resource's watch, delivered after the updates read before them. */
export type FeedMarker =
  | { readonly kind: 'synced'; readonly resource: ResourceName; readonly objects: number }
  | { readonly kind: 'watching'; readonly resource: ResourceName }
  | { readonly kind: 'error'; readonly resource: ResourceName }
  | { readonly kind: 'relist'; readonly resource: ResourceName; readonly reason: string }
  /**
   * Every change of the resource up to `version` is in the batches sent so far (none is waiting in
   * the worker); with the objects' fingerprint then; `listed`: a list ended at or since the last.
   */
  | {
      readonly kind: 'progress';
      readonly resource: ResourceName;
      readonly version: number;
      readonly fingerprint: StateFingerprint;
      readonly listed: boolean;
    };

/** Worker → main. */
export type WorkerMessage =
  | { readonly type: 'configured'; readonly from: string; readonly server: string }
  | { readonly type: 'fatal'; readonly message: string; readonly code: string; readonly hint?: string }
  | { readonly type: 'gc-done'; readonly heapUsed: number; readonly heapTotal: number }
  /** The worker's V8 heap, every few seconds: the main thread's metrics cannot read it. */
  | { readonly type: 'heap'; readonly heapUsed: number; readonly heapTotal: number }
  | {
      readonly type: 'batch';
      readonly updates: readonly FeedUpdate[];
      readonly markers: readonly FeedMarker[];
      /** Updates still waiting in the worker after this batch. */
      readonly pending: number;
      /** Events replaced by a later state of the same object before they were sent, so far. */
      readonly coalesced: number;
      /** When the oldest update still waiting in the worker was read; 0 when none. */
      readonly oldestPendingMs: number;
    };

/** Main → worker: a batch is applied, send the next; or run a full GC (benchmarks, --expose-gc). */
export type MainMessage = { readonly type: 'ack' } | { readonly type: 'gc' };

/** What the worker is started with. */
export interface WorkerConfig {
  readonly kube: KubeConfigSource;
  readonly resources: readonly ResourceName[];
  readonly pageSize: number;
  readonly retryBaseMs: number;
  readonly retryMaxMs: number;
  /** Updates per batch at most. */
  readonly maxBatch: number;
  /** Objects the store holds already (after a worker restart): a relist drops those gone. */
  readonly known: Partial<Record<ResourceName, readonly string[]>>;
  readonly logLevel: 'info' | 'debug';
  /** Where the node caches' pods are listed from (with `node-caches` among the resources). */
  readonly nodeCaches?: { readonly namespace: string; readonly labelSelector: string };
  /** A Corefile's `endpoint_pod_names`: an endpoint without a hostname takes its pod's name. */
  readonly endpointPodNames?: boolean;
  /** A clusterset zone is served: imported EndpointSlices are read as their ServiceImports' groups. */
  readonly multicluster?: boolean;
}
