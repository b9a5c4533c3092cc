import { isDns1123Label, readApiAddress } from '@cluster-dns/wire';
import type { V1EndpointSlice, V1Endpoints, V1Pod, V1Service } from '@kubernetes/client-node';
import type {
  EndpointGroup,
  NodeCacheInfo,
  PodInfo,
  Protocol,
  ServiceCidrInfo,
  ServiceInfo,
  ServicePort,
} from './cluster-model.js';
import { type EndpointInput, packEndpointGroup } from './endpoint-group.js';

const TOLERATE_UNREADY = 'service.alpha.kubernetes.io/tolerate-unready-endpoints';

/**
 * Addresses compare as text, so each is kept in one form, read as Kubernetes reads it (leading
 * zeros decimal, IPv4-mapped IPv6 as IPv4, RFC 5952 IPv6): see wire's readApiAddress.
 */
export const normalizeIp = readApiAddress;

function toProtocol(protocol: string | undefined): Protocol {
  const p = (protocol ?? 'TCP').toLowerCase();
  return p === 'udp' || p === 'sctp' ? p : 'tcp';
}

function toPorts(ports: Array<{ name?: string; port?: number; protocol?: string }> | undefined): ServicePort[] {
  return (ports ?? [])
    .filter((p) => typeof p.port === 'number' && p.port > 0 && p.port < 65536)
    .map((p) => ({ name: (p.name ?? '').toLowerCase(), port: p.port as number, protocol: toProtocol(p.protocol) }));
}

export function toServiceInfo(svc: V1Service): ServiceInfo | undefined {
  const namespace = svc.metadata?.namespace;
  const name = svc.metadata?.name;
  if (!namespace || !name) return undefined;
  const spec = svc.spec ?? {};
  const rawIPs = spec.clusterIPs?.length ? spec.clusterIPs : spec.clusterIP ? [spec.clusterIP] : [];
  const headless = rawIPs[0] === 'None';
  const isExternal = spec.type === 'ExternalName';
  const clusterIPs =
    headless || isExternal ? [] : rawIPs.map(normalizeIp).filter((ip): ip is string => ip !== undefined);
  const annotation = svc.metadata?.annotations?.[TOLERATE_UNREADY];
  const externalAddresses = [
    ...(spec.externalIPs ?? []).map(normalizeIp),
    ...(svc.status?.loadBalancer?.ingress ?? []).map((i) =>
      i.ip ? normalizeIp(i.ip) : i.hostname ? i.hostname.toLowerCase().replace(/\.$/, '') : undefined,
    ),
  ].filter((a): a is string => a !== undefined);
  return {
    namespace,
    name,
    kind: isExternal ? 'external-name' : headless ? 'headless' : 'cluster-ip',
    clusterIPs,
    externalName: isExternal && spec.externalName ? spec.externalName.toLowerCase().replace(/\.$/, '') : undefined,
    ports: toPorts(spec.ports),
    publishNotReady: spec.publishNotReadyAddresses === true || annotation === 'true',
    ...(externalAddresses.length ? { externalAddresses } : {}),
  };
}

/**
 * A ServiceImport (multicluster.x-k8s.io, KEP-1645) as a Service of the clusterset zone: a
 * ClusterSetIP import answers its `ips` as a ClusterIP Service its cluster IPs, a Headless one its
 * imported endpoints. The ports are the import's own (an SRV per named port).
 */
export function toServiceImportInfo(im: ServiceImportObject): ServiceInfo | undefined {
  const namespace = im.metadata?.namespace;
  const name = im.metadata?.name;
  if (!namespace || !name) return undefined;
  const spec = im.spec ?? {};
  const headless = spec.type === 'Headless';
  return {
    namespace,
    name,
    kind: headless ? 'headless' : 'cluster-ip',
    clusterIPs: headless ? [] : (spec.ips ?? []).map(normalizeIp).filter((ip): ip is string => ip !== undefined),
    externalName: undefined,
    ports: toPorts(spec.ports),
    // The exporting clusters decide readiness: an imported endpoint is published when ready.
    publishNotReady: false,
    clusterset: true,
  };
}

/** The fields of a ServiceImport DNS reads (sigs.k8s.io/mcs-api v1alpha1; not in client-node's models). */
export interface ServiceImportObject {
  metadata?: { namespace?: string; name?: string };
  spec?: {
    type?: string;
    ips?: string[];
    ports?: Array<{ name?: string; port?: number; protocol?: string }>;
  };
}

const TRIGGER_TIME = 'endpoints.kubernetes.io/last-change-trigger-time';
/** The labels an MCS controller puts on the EndpointSlices it imports (KEP-1645). */
const IMPORTED_SERVICE = 'multicluster.kubernetes.io/service-name';
const SOURCE_CLUSTER = 'multicluster.kubernetes.io/source-cluster';

/**
 * One EndpointSlice as a group. `podNames` (a Corefile's `endpoint_pod_names`): an endpoint with
 * no hostname is named after the pod its targetRef names, when that is a DNS label (63 octets at
 * most), as CoreDNS names it. `multicluster`: a slice imported from a member cluster (labelled
 * with the imported service and its source cluster) is a group of that ServiceImport; without it,
 * or without a source cluster that is a DNS label, such a slice has nothing for DNS.
 */
export function toEndpointGroup(
  slice: V1EndpointSlice,
  options: { podNames?: boolean; multicluster?: boolean } = {},
): EndpointGroup | undefined {
  const namespace = slice.metadata?.namespace;
  const name = slice.metadata?.name;
  const labels = slice.metadata?.labels ?? {};
  const own = labels['kubernetes.io/service-name'];
  const imported = own ? undefined : labels[IMPORTED_SERVICE];
  const clusterId = imported ? labels[SOURCE_CLUSTER]?.toLowerCase() : undefined;
  if (imported && (!options.multicluster || !clusterId || !isDns1123Label(clusterId))) return undefined;
  const serviceName = own ?? imported;
  const podNames = options.podNames === true;
  if (!namespace || !name || !serviceName) return undefined;
  // FQDN slices name hosts, not addresses: DNS has nothing to publish from them.
  if (slice.addressType !== 'IPv4' && slice.addressType !== 'IPv6') return undefined;
  const trigger = slice.metadata?.annotations?.[TRIGGER_TIME];
  return packEndpointGroup(
    {
      namespace,
      name,
      serviceName,
      ports: toPorts(slice.ports),
      triggerTimeMs: trigger ? Date.parse(String(trigger)) || 0 : 0,
      ...(clusterId ? { clusterId } : {}),
    },
    (slice.endpoints ?? []).map((e) => ({
      addresses: (e.addresses ?? []).map(normalizeIp).filter((ip): ip is string => ip !== undefined),
      // The API says a nil ready condition is to be read as ready.
      ready: e.conditions?.ready !== false,
      terminating: e.conditions?.terminating === true,
      hostname: e.hostname
        ? e.hostname.toLowerCase()
        : podNames && e.targetRef?.kind === 'Pod' && e.targetRef.name && isDns1123Label(e.targetRef.name.toLowerCase())
          ? e.targetRef.name.toLowerCase()
          : undefined,
    })),
  );
}

/** A legacy v1 Endpoints object as one group: ready `addresses` and `notReadyAddresses`. */
export function toEndpointGroupFromEndpoints(ep: V1Endpoints): EndpointGroup | undefined {
  const namespace = ep.metadata?.namespace;
  const name = ep.metadata?.name;
  if (!namespace || !name) return undefined;
  const endpoints: EndpointInput[] = [];
  const ports: ServicePort[] = [];
  for (const subset of ep.subsets ?? []) {
    for (const p of toPorts(subset.ports)) {
      if (!ports.some((q) => q.name === p.name && q.protocol === p.protocol)) ports.push(p);
    }
    const add = (list: typeof subset.addresses, ready: boolean) => {
      for (const a of list ?? []) {
        const ip = normalizeIp(a.ip);
        if (ip) endpoints.push({ addresses: [ip], ready, terminating: false, hostname: a.hostname?.toLowerCase() });
      }
    };
    add(subset.addresses, true);
    add(subset.notReadyAddresses, false);
  }
  return packEndpointGroup({ namespace, name, serviceName: name, ports }, endpoints);
}

export function toPodInfo(pod: V1Pod): PodInfo | undefined {
  const namespace = pod.metadata?.namespace;
  const name = pod.metadata?.name;
  if (!namespace || !name) return undefined;
  const phase = pod.status?.phase;
  // An ended pod keeps its podIP in status, but the kubelet has released the address for reuse.
  const ended = phase === 'Succeeded' || phase === 'Failed';
  const raw = ended ? [] : (pod.status?.podIPs?.map((p) => p.ip) ?? (pod.status?.podIP ? [pod.status.podIP] : []));
  const spec = pod.spec;
  const policy = spec?.dnsPolicy ?? 'ClusterFirst';
  const searchDefault =
    (policy === 'ClusterFirst' || policy === 'ClusterFirstWithHostNet') &&
    spec?.hostNetwork !== true &&
    !spec?.dnsConfig?.searches?.length &&
    !spec?.dnsConfig?.options?.length;
  return {
    namespace,
    name,
    ips: raw.map(normalizeIp).filter((ip): ip is string => ip !== undefined),
    searchDefault,
  };
}

/**
 * A node-local DaemonSet pod as a NOTIFY target: only once it is ready (it answers on its node's
 * address from then on; a NOTIFY before that would only be retried), at its hostIP (hostNetwork).
 */
export function toNodeCacheInfo(pod: V1Pod): NodeCacheInfo | undefined {
  const namespace = pod.metadata?.namespace;
  const name = pod.metadata?.name;
  const hostIP = normalizeIp(pod.status?.hostIP ?? '');
  const ready = pod.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true;
  if (!namespace || !name || !hostIP || !ready || pod.metadata?.deletionTimestamp) return undefined;
  return { namespace, name, hostIP };
}

/** A ServiceCIDR (networking.k8s.io/v1): the fields DNS reads (client-node 2.0 has no model of it). */
export interface ServiceCidrObject {
  metadata?: { name?: string };
  spec?: { cidrs?: string[] };
}

/**
 * A ServiceCIDR's blocks. Its Ready condition is not waited for: the API server allocates from a
 * block only once it is ready, and one being deleted keeps its Services until they go, so every
 * block the object names may hold a cluster address.
 */
export function toServiceCidrInfo(o: ServiceCidrObject): ServiceCidrInfo | undefined {
  const name = o.metadata?.name;
  if (!name) return undefined;
  return { name, cidrs: [...(o.spec?.cidrs ?? [])] };
}
