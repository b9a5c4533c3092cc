import type { KubeObject } from './resources.js';

export interface PortSpec {
  name?: string;
  port: number;
  protocol?: 'TCP' | 'UDP' | 'SCTP';
}

export interface ServiceSpec {
  clusterIPs?: string[];
  headless?: boolean;
  externalName?: string;
  ports?: PortSpec[];
  publishNotReadyAddresses?: boolean;
}

/** A Service as the API server would hold it. */
export function service(namespace: string, name: string, spec: ServiceSpec = {}): KubeObject {
  const clusterIPs = spec.headless ? ['None'] : (spec.clusterIPs ?? []);
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace },
    spec: {
      type: spec.externalName ? 'ExternalName' : 'ClusterIP',
      ...(spec.externalName ? { externalName: spec.externalName } : { clusterIP: clusterIPs[0], clusterIPs }),
      ports: (spec.ports ?? []).map((p) => ({ protocol: 'TCP', ...p })),
      ...(spec.publishNotReadyAddresses ? { publishNotReadyAddresses: true } : {}),
    },
  };
}

export interface EndpointSpec {
  addresses: string[];
  ready?: boolean;
  serving?: boolean;
  terminating?: boolean;
  hostname?: string;
  nodeName?: string;
  podName?: string;
}

/** An EndpointSlice of a Service (label kubernetes.io/service-name). */
export function endpointSlice(
  namespace: string,
  serviceName: string,
  sliceName: string,
  endpoints: EndpointSpec[],
  options: { addressType?: 'IPv4' | 'IPv6'; ports?: PortSpec[] } = {},
): KubeObject {
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { name: sliceName, namespace, labels: { 'kubernetes.io/service-name': serviceName } },
    addressType: options.addressType ?? 'IPv4',
    endpoints: endpoints.map((e) => ({
      addresses: e.addresses,
      conditions: {
        ready: e.ready ?? true,
        serving: e.serving ?? e.ready ?? true,
        terminating: e.terminating ?? false,
      },
      ...(e.hostname ? { hostname: e.hostname } : {}),
      ...(e.nodeName ? { nodeName: e.nodeName } : {}),
      ...(e.podName ? { targetRef: { kind: 'Pod', name: e.podName, namespace } } : {}),
    })),
    ports: (options.ports ?? []).map((p) => ({ protocol: 'TCP', ...p })),
  };
}

/**
 * A ServiceImport (sigs.k8s.io/mcs-api v1alpha1) as an MCS controller writes it in an importing
 * cluster: ClusterSetIP with its clusterset IPs, or Headless.
 */
export function serviceImport(
  namespace: string,
  name: string,
  spec: { type?: 'ClusterSetIP' | 'Headless'; ips?: string[]; ports?: PortSpec[] } = {},
): KubeObject {
  return {
    apiVersion: 'multicluster.x-k8s.io/v1alpha1',
    kind: 'ServiceImport',
    metadata: { name, namespace },
    spec: {
      type: spec.type ?? 'ClusterSetIP',
      ...(spec.ips ? { ips: spec.ips } : {}),
      ports: (spec.ports ?? []).map((p) => ({ protocol: 'TCP', ...p })),
    },
  };
}

/**
 * An EndpointSlice an MCS controller imports from a member cluster: labelled with the imported
 * service's name and the cluster it comes from, not with kubernetes.io/service-name.
 */
export function importedEndpointSlice(
  namespace: string,
  serviceName: string,
  sliceName: string,
  clusterId: string,
  endpoints: EndpointSpec[],
  options: { addressType?: 'IPv4' | 'IPv6'; ports?: PortSpec[] } = {},
): KubeObject {
  const slice = endpointSlice(namespace, serviceName, sliceName, endpoints, options);
  slice.metadata.labels = {
    'multicluster.kubernetes.io/service-name': serviceName,
    'multicluster.kubernetes.io/source-cluster': clusterId,
  };
  return slice;
}

/** Legacy v1 Endpoints of a Service, for --endpoints-api=endpoints. */
export function endpoints(
  namespace: string,
  name: string,
  ready: Array<{ ip: string; hostname?: string }>,
  notReady: Array<{ ip: string; hostname?: string }> = [],
  ports: PortSpec[] = [],
): KubeObject {
  return {
    apiVersion: 'v1',
    kind: 'Endpoints',
    metadata: { name, namespace },
    subsets: [
      {
        addresses: ready,
        notReadyAddresses: notReady,
        ports: ports.map((p) => ({ protocol: 'TCP', ...p })),
      },
    ],
  };
}

export function namespace(name: string): KubeObject {
  return { apiVersion: 'v1', kind: 'Namespace', metadata: { name } };
}

/**
 * A Running Pod. `hostIP`: the node's address (status.hostIP); with `hostNetwork` its pod IPs are
 * that address too, as for a DaemonSet such as node-local-dns.
 */
export function pod(
  namespace: string,
  name: string,
  ips: string[],
  options: { ready?: boolean; labels?: Record<string, string>; hostIP?: string; hostNetwork?: boolean } = {},
): KubeObject {
  const podIps = options.hostNetwork && options.hostIP ? [options.hostIP] : ips;
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace, ...(options.labels ? { labels: options.labels } : {}) },
    spec: {
      containers: [{ name: 'main', image: 'registry.example.org/app:1' }],
      ...(options.hostNetwork ? { hostNetwork: true } : {}),
    },
    status: {
      phase: 'Running',
      ...(options.hostIP ? { hostIP: options.hostIP, hostIPs: [{ ip: options.hostIP }] } : {}),
      podIP: podIps[0],
      podIPs: podIps.map((ip) => ({ ip })),
      conditions: [{ type: 'Ready', status: options.ready === false ? 'False' : 'True' }],
    },
  };
}

/**
 * An EndpointSlice as the EndpointSlice controller writes it in a real cluster: owner reference,
 * managed-by label, the last-change-trigger-time annotation, managedFields, and per endpoint a
 * targetRef with its uid, the node, the zone and all three conditions. About 270 bytes an
 * endpoint: a 100-endpoint slice is ~27 KB of JSON, as the bench's churn must be.
 */
export function controllerEndpointSlice(
  namespace: string,
  serviceName: string,
  sliceName: string,
  endpoints: EndpointSpec[],
  options: { ports?: PortSpec[]; triggerTime?: Date; zones?: number } = {},
): KubeObject {
  const slice = endpointSlice(namespace, serviceName, sliceName, endpoints, { ports: options.ports });
  const time = (options.triggerTime ?? new Date()).toISOString().replace(/\.\d+Z$/, 'Z');
  const zones = options.zones ?? 3;
  slice.metadata = {
    ...slice.metadata,
    generateName: `${serviceName}-`,
    labels: {
      'kubernetes.io/service-name': serviceName,
      'endpointslice.kubernetes.io/managed-by': 'endpointslice-controller.k8s.io',
    },
    annotations: { 'endpoints.kubernetes.io/last-change-trigger-time': time },
    ownerReferences: [
      {
        apiVersion: 'v1',
        kind: 'Service',
        name: serviceName,
        uid: uidOf(`svc/${namespace}/${serviceName}`),
        controller: true,
        blockOwnerDeletion: true,
      },
    ],
    managedFields: [
      {
        manager: 'kube-controller-manager',
        operation: 'Update',
        apiVersion: 'discovery.k8s.io/v1',
        time,
        fieldsType: 'FieldsV1',
        fieldsV1: {
          'f:addressType': {},
          'f:endpoints': {},
          'f:metadata': {
            'f:annotations': { '.': {}, 'f:endpoints.kubernetes.io/last-change-trigger-time': {} },
            'f:generateName': {},
            'f:labels': { '.': {}, 'f:endpointslice.kubernetes.io/managed-by': {}, 'f:kubernetes.io/service-name': {} },
            'f:ownerReferences': { '.': {}, [`k:{"uid":"${uidOf(`svc/${namespace}/${serviceName}`)}"}`]: {} },
          },
          'f:ports': {},
        },
      },
    ],
  };
  slice.endpoints = (slice.endpoints as Array<Record<string, unknown>>).map((e, i) => {
    const spec = endpoints[i] as EndpointSpec;
    const podName = spec.podName ?? `${serviceName}-${(uidOf(`${sliceName}/${i}`) as string).slice(0, 10)}-${i}`;
    return {
      ...e,
      nodeName: spec.nodeName ?? `node-${namespace}-${i % 50}.compute.internal`,
      zone: `zone-${String.fromCharCode(97 + (i % zones))}`,
      targetRef: { kind: 'Pod', namespace, name: podName, uid: uidOf(`pod/${namespace}/${podName}`) },
    };
  });
  return slice;
}

/** A ServiceCIDR (networking.k8s.io/v1), as kube-apiserver creates `kubernetes` from its range. */
export function serviceCidr(name: string, cidrs: string[]): KubeObject {
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'ServiceCIDR',
    metadata: { name },
    spec: { cidrs },
    status: { conditions: [{ type: 'Ready', status: 'True', reason: '', message: '' }] },
  };
}

/** A stable UUID-shaped id for a name, so fixtures are the same on every run. */
function uidOf(text: string): string {
  let h = 0x811c9dc5;
  const hex: string[] = [];
  for (let round = 0; round < 4; round++) {
    for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193) >>> 0;
    h = Math.imul(h ^ round, 0x01000193) >>> 0;
    hex.push(h.toString(16).padStart(8, '0'));
  }
  const s = hex.join('');
  return `${s.slice(0, 8)}-${s.slice(8, 12)}-${s.slice(12, 16)}-${s.slice(16, 20)}-${s.slice(20, 32)}`;
}
