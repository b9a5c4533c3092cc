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

export function pod(namespace: string, name: string, ips: string[], options: { ready?: boolean } = {}): KubeObject {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace },
    spec: { containers: [{ name: 'main', image: 'registry.example.org/app:1' }] },
    status: {
      phase: 'Running',
      podIP: ips[0],
      podIPs: ips.map((ip) => ({ ip })),
      conditions: [{ type: 'Ready', status: options.ready === false ? 'False' : 'True' }],
    },
  };
}
