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
  /**
   * Its `externalIPs`, then its LoadBalancer ingress (an IP, else a host name, lowercased): what
   * a Corefile's k8s_external answers. Unset when it has none.
   */
  readonly externalAddresses?: readonly string[];
  /**
   * A ServiceImport (Multi-Cluster Services, KEP-1645): its names are in the clusterset zone, its
   * ClusterSetIPs are `clusterIPs`, a Headless import is `headless`.
   */
  readonly clusterset?: true;
}

/** Bits of EndpointGroup.flags, per endpoint. */
export const ENDPOINT = { READY: 1, TERMINATING: 2 } as const;

/**
 * One EndpointSlice (or one legacy Endpoints object), owned by a Service, with its endpoints
 * packed into a few arrays and two strings: a group is about ten objects however many endpoints
 * it has. The answering thread's full GCs visit every object it holds, so a string per address
 * and per hostname (two hundred thousand at 100k endpoints) was most of their work.
 * Endpoint i has the addresses numbered starts[i] .. starts[i + 1] - 1; address a is
 * addressText.slice(addressAt[a], addressAt[a + 1]). Read them through endpoint-group.ts.
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
  /** Which addresses are each endpoint's (count + 1 entries). */
  readonly starts: Uint32Array;
  /** Every endpoint's addresses, one after another with nothing between; IPv6 in RFC 5952 form. */
  readonly addressText: string;
  /** Where each address begins in addressText (one entry per address, and its end). */
  readonly addressAt: Uint32Array;
  /** Every endpoint's hostname (lowercased), one after another; '' when none has one. */
  readonly hostnameText: string;
  /** Where endpoint i's hostname begins in hostnameText (count + 1 entries); undefined when none has one. */
  readonly hostnameAt: Uint32Array | undefined;
  /** EndpointSlice annotation endpoints.kubernetes.io/last-change-trigger-time, in ms; 0 when absent. */
  readonly triggerTimeMs: number;
  /**
   * An imported slice (multicluster.kubernetes.io/source-cluster): the member cluster its endpoints
   * are in. Its owner is the ServiceImport of `serviceName`, and its endpoints' names carry the id.
   */
  readonly clusterId?: string;
}

export interface PodInfo {
  readonly namespace: string;
  readonly name: string;
  /** None once the pod has ended (Succeeded, Failed): its addresses may be another pod's now. */
  readonly ips: readonly string[];
  /**
   * Whether its resolv.conf is the kubelet's cluster default (`<ns>.svc.<zone> svc.<zone> <zone>`,
   * ndots:5): dnsPolicy ClusterFirst, not hostNetwork, no dnsConfig searches or options of its own.
   * Server-side search (the forwarder's autopath) walks only such a pod's search path for it.
   */
  readonly searchDefault: boolean;
}

export const serviceKey = (namespace: string, name: string) => `${namespace}/${name}`;

/** A ServiceImport's key: apart from a Service of the same name (`@` is in no object name). */
export const importKey = (namespace: string, name: string) => `${namespace}/${name}@clusterset`;

/** Whether an owner key is a ServiceImport's. */
export const isImportKey = (key: string) => key.endsWith('@clusterset');

/** The key of a Service or ServiceImport. */
export const ownerKeyOf = (service: Pick<ServiceInfo, 'namespace' | 'name' | 'clusterset'>) =>
  service.clusterset ? importKey(service.namespace, service.name) : serviceKey(service.namespace, service.name);

/** A node cache (a ready pod of the node-local DaemonSet): NOTIFY goes to its node's address. */
export interface NodeCacheInfo {
  readonly namespace: string;
  readonly name: string;
  readonly hostIP: string;
}

/**
 * A ServiceCIDR (networking.k8s.io/v1, Kubernetes 1.33+), or the `--service-cidr` flag: blocks the
 * cluster gives Services their addresses from, whose reverse zones the record-builder owns.
 */
export interface ServiceCidrInfo {
  readonly name: string;
  /** Blocks as the object writes them (`10.96.0.0/12`, `fd00:10:96::/108`). */
  readonly cidrs: readonly string[];
}
