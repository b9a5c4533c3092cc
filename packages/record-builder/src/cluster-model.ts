/**
 * The few fields of Kubernetes objects that DNS uses, in compact form. The watchers make these
 * from API objects (in the API worker); record code never sees client-node types. They cross a
 * worker_threads boundary by structured clone, so they are plain data and typed arrays.
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

/** Bits of EndpointGroup.flags, per endpoint. */
export const ENDPOINT = { READY: 1, TERMINATING: 2 } as const;

/**
 * One EndpointSlice (or one legacy Endpoints object), owned by a Service, with its endpoints
 * packed into a few arrays: about 50 bytes and a hostname each, instead of a few hundred as
 * objects. Endpoint i has the addresses at indexes starts[i] .. starts[i + 1] - 1.
 */
export interface EndpointGroup {
  readonly namespace: string;
  /** The object's own name; one Service may have many slices. */
  readonly name: string;
  readonly serviceName: string;
  readonly ports: readonly ServicePort[];
  /** Number of endpoints. */
  readonly count: number;
  /** ENDPOINT bits per endpoint. */
  readonly flags: Uint8Array;
  /** Where each endpoint's addresses start (count + 1 entries). */
  readonly starts: Uint32Array;
  /** Every endpoint's addresses, in order; IPv6 in RFC 5952 form. */
  readonly addresses: readonly string[];
  /** Per endpoint, lowercased; undefined when no endpoint of the group has one. */
  readonly hostnames: readonly (string | null)[] | undefined;
  /** EndpointSlice annotation endpoints.kubernetes.io/last-change-trigger-time, in ms; 0 when absent. */
  readonly triggerTimeMs: number;
}

export interface PodInfo {
  readonly namespace: string;
  readonly name: string;
  readonly ips: readonly string[];
}

export const serviceKey = (namespace: string, name: string) => `${namespace}/${name}`;

/** A node cache (a ready pod of the node-local DaemonSet): NOTIFY goes to its node's address. */
export interface NodeCacheInfo {
  readonly namespace: string;
  readonly name: string;
  readonly hostIP: string;
}
