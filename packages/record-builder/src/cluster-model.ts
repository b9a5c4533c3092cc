/**
 * The few fields of Kubernetes objects that DNS uses. The informer module makes these from
 * client-node types; record code never sees client-node types.
 */

export type Protocol = 'tcp' | 'udp' | 'sctp';

export interface ServicePort {
  /** Empty when the port has no name. */
  readonly name: string;
  readonly port: number;
  readonly protocol: Protocol;
}

export type ServiceKind = 'cluster-ip' | 'headless' | 'external-name';

export interface ServiceInfo {
  readonly namespace: string;
  readonly name: string;
  readonly kind: ServiceKind;
  /** IPv4 and IPv6 cluster IPs, in API order. Empty for headless and ExternalName. */
  readonly clusterIPs: readonly string[];
  /** The ExternalName target, lowercased, without a trailing dot. */
  readonly externalName: string | undefined;
  readonly ports: readonly ServicePort[];
  /** publishNotReadyAddresses, or the legacy tolerate-unready-endpoints annotation. */
  readonly publishNotReady: boolean;
}

export interface EndpointInfo {
  readonly addresses: readonly string[];
  readonly ready: boolean;
  readonly terminating: boolean;
  readonly hostname: string | undefined;
}

/** One EndpointSlice (or one subset of a legacy Endpoints object), owned by a Service. */
export interface EndpointGroup {
  readonly namespace: string;
  /** The slice's own name; one Service may have many. */
  readonly name: string;
  readonly serviceName: string;
  readonly endpoints: readonly EndpointInfo[];
  readonly ports: readonly ServicePort[];
}

export interface PodInfo {
  readonly namespace: string;
  readonly name: string;
  readonly ips: readonly string[];
}

export const serviceKey = (namespace: string, name: string) => `${namespace}/${name}`;
