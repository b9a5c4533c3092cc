/** A Kubernetes object as the test API server stores it: plain JSON. */
export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
    creationTimestamp?: string;
    generation?: number;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    [key: string]: unknown;
  };
  [key: string]: unknown;
}

/** One REST resource the server speaks: where it lives and what it holds. */
export interface ResourceKind {
  /** Plural path segment: `services`. */
  readonly plural: string;
  readonly kind: string;
  /** `''` for the core group. */
  readonly group: string;
  readonly version: string;
  readonly namespaced: boolean;
  readonly shortNames?: readonly string[];
}

export const RESOURCE_KINDS: readonly ResourceKind[] = [
  { plural: 'namespaces', kind: 'Namespace', group: '', version: 'v1', namespaced: false, shortNames: ['ns'] },
  { plural: 'services', kind: 'Service', group: '', version: 'v1', namespaced: true, shortNames: ['svc'] },
  { plural: 'endpoints', kind: 'Endpoints', group: '', version: 'v1', namespaced: true, shortNames: ['ep'] },
  { plural: 'pods', kind: 'Pod', group: '', version: 'v1', namespaced: true, shortNames: ['po'] },
  { plural: 'configmaps', kind: 'ConfigMap', group: '', version: 'v1', namespaced: true, shortNames: ['cm'] },
  { plural: 'endpointslices', kind: 'EndpointSlice', group: 'discovery.k8s.io', version: 'v1', namespaced: true },
  // GA in 1.33: the blocks Services get their cluster IPs from (the API server creates `kubernetes`).
  { plural: 'servicecidrs', kind: 'ServiceCIDR', group: 'networking.k8s.io', version: 'v1', namespaced: false },
  // The Multi-Cluster Services API's import (sigs.k8s.io/mcs-api), a CRD in a real cluster.
  {
    plural: 'serviceimports',
    kind: 'ServiceImport',
    group: 'multicluster.x-k8s.io',
    version: 'v1alpha1',
    namespaced: true,
    shortNames: ['svcim'],
  },
];

export function apiVersionOf(kind: ResourceKind): string {
  return kind.group === '' ? kind.version : `${kind.group}/${kind.version}`;
}

export function kindOfObject(object: KubeObject): ResourceKind | undefined {
  return RESOURCE_KINDS.find((k) => k.kind === object.kind && apiVersionOf(k) === object.apiVersion);
}

/** What a request path names: a resource, maybe a namespace, maybe one object. */
export interface ResourcePath {
  kind: ResourceKind;
  namespace: string | undefined;
  name: string | undefined;
}

/**
 * Parses `/api/v1/services`, `/api/v1/namespaces/NS/services[/NAME]`, `/api/v1/namespaces[/NAME]`
 * and the same under `/apis/GROUP/VERSION/`.
 */
export function parseResourcePath(pathname: string): ResourcePath | undefined {
  const parts = pathname.split('/').filter(Boolean);
  let rest: string[];
  let group: string;
  let version: string;
  if (parts[0] === 'api' && parts.length >= 3) {
    group = '';
    version = parts[1] as string;
    rest = parts.slice(2);
  } else if (parts[0] === 'apis' && parts.length >= 4) {
    group = parts[1] as string;
    version = parts[2] as string;
    rest = parts.slice(3);
  } else return undefined;
  const find = (plural: string | undefined) =>
    RESOURCE_KINDS.find((k) => k.plural === plural && k.group === group && k.version === version);
  if (rest[0] === 'namespaces' && rest.length >= 3) {
    const kind = find(rest[2]);
    if (!kind || rest.length > 4) return undefined;
    return { kind, namespace: rest[1], name: rest[3] };
  }
  const kind = find(rest[0]);
  if (!kind || rest.length > 2) return undefined;
  return { kind, namespace: undefined, name: rest[1] };
}
