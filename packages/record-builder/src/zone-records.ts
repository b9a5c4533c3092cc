import {
  addressFromReverseName,
  type Fqdn,
  isInZone,
  labelsOf,
  QCLASS,
  QTYPE,
  type Rr,
  toFqdn,
} from '@cluster-dns/wire';
import { type EndpointGroup, importKey, type ServiceInfo, serviceKey } from './cluster-model.js';
import { clientRecord, SCHEMA_VERSION } from './cluster-state.js';
import { isPublished } from './endpoint-group.js';
import { externalPtrTargets, externalRecordsAt, externalSoa, externalZoneOf } from './external-records.js';
import { addressOfDashed, parsePodName } from './pod-records.js';
import {
  baseRecords,
  hostRecords,
  isAnswered,
  isNamespaceExposed,
  portRecords,
  protocolHasPorts,
  ptrTargets,
} from './service-records.js';
import type { NameRecords, ZoneView } from './zone-view.js';

export type { NameRecords };

const none = (exists: boolean, stable = false): NameRecords => ({ rrs: undefined, exists, owners: [], stable });

/**
 * What is at `name`, in the cluster zone, the clusterset zone or a reverse zone. Given the
 * question's type, records no answer of that type reads may be left out (never whether the name
 * exists).
 */
export function recordsAt(view: ZoneView, zone: Fqdn, name: Fqdn, qtype?: number): NameRecords {
  if (zone === view.zone) return clusterRecordsAt(view, name, qtype);
  if (zone === view.clustersetZone) return clustersetRecordsAt(view, zone, name, qtype);
  const external = externalZoneOf(view, zone);
  if (external) return externalRecordsAt(view, external, name, qtype);
  return reverseRecordsAt(view, zone, name);
}

/** The multicluster DNS schema version (KEP-1645's DNS specification, §1). */
export const CLUSTERSET_SCHEMA_VERSION = '1.0.0';

/**
 * The clusterset zone (KEP-1645's DNS specification): each ServiceImport as a Service of this
 * zone. A ClusterSetIP import has its base name and SRV records, and nothing that names one
 * cluster (§2.3.4); a Headless import has its endpoints' addresses at its base name and each at
 * `<hostname>.<clusterid>.<svc>`, with `<clusterid>.<svc>` an empty non-terminal above them.
 */
function clustersetRecordsAt(view: ZoneView, zone: Fqdn, name: Fqdn, qtype?: number): NameRecords {
  const ttl = view.ttlSeconds;
  const labels = labelsOf(name);
  const below = labels.slice(0, labels.length - labelsOf(zone).length);
  const n = below.length;
  if (n === 0) return { rrs: [soaRecord(view, zone), nsRecord(view, zone)], exists: true, owners: [], stable: false };
  const top = below[n - 1] as string;
  if (n === 1 && top === 'dns-version') {
    const txt: Rr = { name, type: QTYPE.TXT, class: QCLASS.IN, ttl, text: [CLUSTERSET_SCHEMA_VERSION] };
    return { rrs: [txt], exists: true, owners: [], stable: true };
  }
  if (top !== 'svc') return none(false);
  const at = serviceAt(view, below, qtype, 'clusterset');
  if ('records' in at) return at.records;
  const { service, groups, owned } = at;
  const first = below[0] as string;
  const second = below[1] as string;
  if (first.startsWith('_')) {
    if (n === 4) return owned(undefined, protocolHasPorts(service, groups, first.slice(1)));
    if (n === 5 && second.startsWith('_'))
      return owned(portRecords(service, groups, first.slice(1), second.slice(1), view));
    return owned(undefined, false);
  }
  if (service.kind !== 'headless') return owned(undefined, false);
  if (n === 4) {
    // `<clusterid>.<svc>`: exists while a published endpoint comes from that cluster.
    let exists = false;
    for (const group of groups) {
      if (group.clusterId !== first) continue;
      for (let i = 0; i < group.count && !exists; i++) exists = isPublished(service, group, i);
    }
    return owned(undefined, exists);
  }
  return owned(hostRecords(service, groups, `${first}.${second}`, view));
}

function clusterRecordsAt(view: ZoneView, name: Fqdn, qtype?: number): NameRecords {
  const ttl = view.ttlSeconds;
  const labels = labelsOf(name);
  const below = labels.slice(0, labels.length - labelsOf(view.zone).length);
  const n = below.length;
  if (n === 0) {
    const ns: Rr = { name, type: QTYPE.NS, class: QCLASS.IN, ttl, target: nameServerName(view) };
    return { rrs: [soaRecord(view, view.zone), ns], exists: true, owners: [], stable: false };
  }
  const top = below[n - 1] as string;
  if (n === 1 && top === 'dns-version') {
    const txt: Rr = { name, type: QTYPE.TXT, class: QCLASS.IN, ttl, text: [SCHEMA_VERSION] };
    return { rrs: [txt], exists: true, owners: [], stable: true };
  }
  if (top === 'dns') return dnsRecordsAt(view, below);
  if (top === 'pod') return podRecordsAt(view, name);
  if (top !== 'svc') return none(false);
  const at = serviceAt(view, below, qtype, 'cluster');
  if ('records' in at) return at.records;
  const { service, groups, owned } = at;
  const first = below[0] as string;
  if (service.kind === 'external-name') return owned(undefined, false);
  if (n === 4) {
    if (first.startsWith('_')) return owned(undefined, protocolHasPorts(service, groups, first.slice(1)));
    return owned(hostRecords(service, groups, first, view));
  }
  const second = below[1] as string;
  if (!first.startsWith('_') || !second.startsWith('_')) return owned(undefined, false);
  return owned(portRecords(service, groups, first.slice(1), second.slice(1), view));
}

/**
 * `svc.<zone>` and below, to the Service (a ServiceImport in the clusterset zone): what is at the
 * name when it is no deeper than the Service's own base name; else the Service, its groups and how
 * to answer for it, for the names below (`below` holds the labels under the zone, `svc` last).
 */
function serviceAt(
  view: ZoneView,
  below: readonly string[],
  qtype: number | undefined,
  zone: 'cluster' | 'clusterset',
):
  | { records: NameRecords }
  | {
      service: ServiceInfo;
      groups: Iterable<EndpointGroup>;
      owned: (rrs: Rr[] | undefined, exists?: boolean) => NameRecords;
    } {
  const { state } = view;
  const imports = zone === 'clusterset';
  const n = below.length;
  if (n === 1) return { records: none(imports ? state.hasImports() : state.hasServices()) };
  const namespace = below[n - 2] as string;
  if (!isNamespaceExposed(namespace, view)) return { records: none(false, true) };
  if (n === 2)
    return {
      records: none(imports ? state.namespaceHasImports(namespace) : state.namespaceHasServices(namespace)),
    };
  const key = (imports ? importKey : serviceKey)(namespace, below[n - 3] as string);
  const service = state.serviceByKey(key);
  if (!service || n > 5) return { records: none(false) };
  const groups = state.groupsOf(key);
  const owned = (rrs: Rr[] | undefined, exists = rrs !== undefined && rrs.length > 0): NameRecords => ({
    rrs,
    exists,
    owners: [key],
    stable: true,
  });
  // Not answered (`ignore empty_service` with no endpoint): NXDOMAIN until an endpoint comes.
  if (!isAnswered(service, groups, view)) return { records: owned(undefined, false) };
  // The base name has names below it only when it has records itself: without published
  // endpoints a headless Service's name does not exist (NXDOMAIN, spec §2.4.1).
  if (n === 3) return { records: owned(baseRecords(service, groups, view, qtype === QTYPE.A || qtype === QTYPE.AAAA)) };
  return { service, groups, owned };
}

/** `ns.dns.<zone>`: the NS target, resolving to the DNS Service's cluster IPs; `dns.<zone>` above it. */
function dnsRecordsAt(view: ZoneView, below: readonly string[]): NameRecords {
  if (below.length === 1) return none(true, true);
  if (below[below.length - 2] === 'client') return clientRecordsAt(view, below);
  if (below.length !== 2 || below[0] !== 'ns') return none(false);
  if (!view.dnsService) return none(true, true);
  const key = serviceKey(view.dnsService.namespace, view.dnsService.name);
  const rrs = nameServerRecords(view, view.state.serviceByKey(key)?.clusterIPs ?? []);
  return { rrs, exists: true, owners: [key], stable: true };
}

/**
 * The client map, `<a-b-c-d>.client.dns.<zone>` TXT (cluster-state.ts's clientRecord): which
 * namespace asks from a pod address, and whether its search path is the kubelet's default; what
 * a forwarder's server-side search reads. Only while pods are watched (--pods=verified).
 */
function clientRecordsAt(view: ZoneView, below: readonly string[]): NameRecords {
  if (view.pods !== 'verified') return none(false);
  if (below.length === 2) return none(true);
  const ip = below.length === 3 ? addressOfDashed(below[0] as string) : undefined;
  const client = ip === undefined ? undefined : view.state.clientAt(ip);
  if (ip === undefined || client === undefined) return none(false);
  const name = toFqdn(`${below.join('.')}.${view.zone}`);
  return { rrs: [clientRecord(name, client, view.ttlSeconds)], exists: true, owners: [], stable: false };
}

/** The zone's name server, `ns.dns.<zone>`: where the NS and SOA records point. */
export const nameServerName = (view: ZoneView): Fqdn => toFqdn(`ns.dns.${view.zone}`);

/** A and AAAA of `ns.dns.<zone>`: the DNS Service's cluster IPs (`--dns-service`). */
export function nameServerRecords(view: ZoneView, clusterIPs: readonly string[]): Rr[] {
  const name = nameServerName(view);
  return clusterIPs.map(
    (ip): Rr =>
      ip.includes(':')
        ? { name, type: QTYPE.AAAA, class: QCLASS.IN, ttl: view.ttlSeconds, address: ip }
        : { name, type: QTYPE.A, class: QCLASS.IN, ttl: view.ttlSeconds, address: ip },
  );
}

/** `<a-b-c-d>.<ns>.pod.<zone>`, as --pods says. Static with insecure, volatile with verified. */
function podRecordsAt(view: ZoneView, name: Fqdn): NameRecords {
  if (view.pods === 'disabled') return none(false);
  const stable = view.pods === 'insecure';
  const pod = parsePodName(name, toFqdn(`pod.${view.zone}`));
  switch (pod.kind) {
    case 'apex':
      return none(true, stable);
    case 'namespace':
      if (!isNamespaceExposed(pod.namespace, view)) return none(false, stable);
      return none(view.pods === 'insecure' || view.state.hasPodsIn(pod.namespace), stable);
    case 'invalid':
      return none(false, stable);
    case 'address': {
      if (!isNamespaceExposed(pod.namespace, view)) return none(false, stable);
      if (view.pods === 'verified' && !view.state.hasPodIp(pod.namespace, pod.ip)) return none(false);
      const rr: Rr = pod.ip.includes(':')
        ? { name, type: QTYPE.AAAA, class: QCLASS.IN, ttl: view.ttlSeconds, address: pod.ip }
        : { name, type: QTYPE.A, class: QCLASS.IN, ttl: view.ttlSeconds, address: pod.ip };
      return { rrs: [rr], exists: true, owners: [], stable };
    }
  }
}

/** PTR names: a full address from the reverse index; a partial one exists when addresses lie below. */
function reverseRecordsAt(view: ZoneView, zone: Fqdn, name: Fqdn): NameRecords {
  if (name === zone || view.state.serviceCidrZoneOf(name, zone) === name)
    return { rrs: [soaRecord(view, name), nsRecord(view, name)], exists: true, owners: [], stable: false };
  const address = addressFromReverseName(name);
  if (address === undefined) {
    const labels = labelsOf(name);
    const below = labels.slice(0, labels.length - labelsOf(zone).length).reverse();
    return none(view.state.hasReversePrefix(below.join('.')));
  }
  // A Service's external address, where k8s_external names this reverse zone: its names there
  // answer (CoreDNS's k8s_external runs before kubernetes); other addresses are the cluster's.
  if (view.externalReverseZones?.some((z) => isInZone(name, z))) {
    const external = externalPtrTargets(view, address);
    if (external.targets.length) {
      const rrs = external.targets.map(
        (target): Rr => ({ name, type: QTYPE.PTR, class: QCLASS.IN, ttl: view.ttlSeconds, target }),
      );
      return { rrs, exists: true, owners: external.owners, stable: false };
    }
  }
  const owners = view.state.ptrOwnersOf(address);
  const targets = new Set<Fqdn>();
  for (const key of owners) {
    const service = view.state.serviceByKey(key);
    if (service && isNamespaceExposed(service.namespace, view))
      for (const t of ptrTargets(service, view.state.groupsOf(key), address, view)) targets.add(t);
  }
  const rrs = [...targets].map(
    (target): Rr => ({ name, type: QTYPE.PTR, class: QCLASS.IN, ttl: view.ttlSeconds, target }),
  );
  // A name with no owner yet may be given one by the next change: only owned answers are stable.
  return { rrs, exists: rrs.length > 0, owners: [...owners], stable: rrs.length > 0 };
}

export function soaRecord(view: ZoneView, zone: Fqdn): Rr {
  const external = externalZoneOf(view, zone);
  if (external) return externalSoa(view, external);
  return {
    name: zone,
    type: QTYPE.SOA,
    class: QCLASS.IN,
    ttl: view.ttlSeconds,
    soa: {
      primary: nameServerName(view),
      admin: toFqdn(`hostmaster.${view.zone}`),
      serial: view.state.serial,
      refresh: 7200,
      retry: 1800,
      expiration: 86400,
      // RFC 2308 §5: the negative TTL is min(SOA TTL, MINIMUM); both are the record TTL.
      minimum: view.ttlSeconds,
    },
  };
}

export function nsRecord(view: ZoneView, zone: Fqdn): Rr {
  return { name: zone, type: QTYPE.NS, class: QCLASS.IN, ttl: view.ttlSeconds, target: nameServerName(view) };
}
