import { isIP } from 'node:net';
import { type Fqdn, labelsOf, QCLASS, QTYPE, type Rr, toFqdn } from '@cluster-dns/wire';
import { type EndpointGroup, type ServiceInfo, serviceKey } from './cluster-model.js';
import { addressesOf, hostnameOf, isPublished } from './endpoint-group.js';
import { isNamespaceExposed, withSrvWeights } from './service-records.js';
import type { ExternalZone, NameRecords, ZoneView } from './zone-view.js';

export type { ExternalZone };

const none = (exists: boolean, stable = false): NameRecords => ({ rrs: undefined, exists, owners: [], stable });

/** The external zone a name is in, if any. */
export function externalZoneOf(view: ZoneView, zone: Fqdn): ExternalZone | undefined {
  return view.external?.find((e) => e.zone === zone);
}

/** `ns1.<apex>.<zone>`: the zone's name server, where its NS and SOA point. */
const nameServerOf = (ext: ExternalZone): Fqdn => toFqdn(`ns1.${ext.apex}.${ext.zone}`);

export function externalSoa(view: ZoneView, ext: ExternalZone): Rr {
  return {
    name: ext.zone,
    type: QTYPE.SOA,
    class: QCLASS.IN,
    ttl: ext.ttlSeconds,
    soa: {
      primary: nameServerOf(ext),
      admin: toFqdn(`hostmaster.${ext.apex}.${ext.zone}`),
      serial: view.state.serial,
      refresh: 7200,
      retry: 1800,
      expiration: 86400,
      minimum: ext.ttlSeconds,
    },
  };
}

const addressRr = (name: Fqdn, ip: string, ttl: number): Rr =>
  isIP(ip) === 6
    ? { name, type: QTYPE.AAAA, class: QCLASS.IN, ttl, address: ip }
    : { name, type: QTYPE.A, class: QCLASS.IN, ttl, address: ip };

/** The address records, or a CNAME for a LoadBalancer ingress that is a host name, at `name`. */
function externalRecords(name: Fqdn, addresses: readonly string[], ttl: number): Rr[] {
  return addresses.map((a) =>
    isIP(a) ? addressRr(name, a, ttl) : { name, type: QTYPE.CNAME, class: QCLASS.IN, ttl, target: toFqdn(a) },
  );
}

const srv = (name: Fqdn, port: number, target: Fqdn, ttl: number): Rr => ({
  name,
  type: QTYPE.SRV,
  class: QCLASS.IN,
  ttl,
  priority: 0,
  weight: 0,
  port,
  target,
});

/** A headless Service's published endpoints, each with its label (hostname, else its address dashed) and addresses. */
function endpointsOf(service: ServiceInfo, groups: Iterable<EndpointGroup>) {
  const out: { label: string; addresses: string[]; group: EndpointGroup }[] = [];
  for (const group of groups)
    for (let i = 0; i < group.count; i++)
      if (isPublished(service, group, i)) {
        const addresses = addressesOf(group, i);
        out.push({ label: hostnameOf(group, i) ?? (addresses[0] ?? '').replace(/[.:]/g, '-'), addresses, group });
      }
  return out;
}

const matchesPort = (p: { name: string; protocol: string }, port: string | undefined, protocol: string | undefined) =>
  (port === undefined || p.name === port) && (protocol === undefined || p.protocol === protocol);

/**
 * What is at `name` in an external zone: the apex's SOA and NS, `ns1.<apex>` with the DNS
 * Service's addresses (its external ones, else its cluster IPs), and the Services' names.
 */
export function externalRecordsAt(view: ZoneView, ext: ExternalZone, name: Fqdn, qtype?: number): NameRecords {
  const ttl = ext.ttlSeconds;
  const labels = labelsOf(name);
  const below = labels.slice(0, labels.length - labelsOf(ext.zone).length);
  const n = below.length;
  if (n === 0) {
    const ns: Rr = { name, type: QTYPE.NS, class: QCLASS.IN, ttl, target: nameServerOf(ext) };
    return { rrs: [externalSoa(view, ext), ns], exists: true, owners: [], stable: false };
  }
  const top = below[n - 1] as string;
  if (top === ext.apex) {
    if (n === 1) return none(true, true);
    if (n !== 2 || below[0] !== 'ns1') return none(false);
    if (!view.dnsService) return none(true, true);
    const key = serviceKey(view.dnsService.namespace, view.dnsService.name);
    const dns = view.state.serviceByKey(key);
    const ips = dns?.externalAddresses?.filter((a) => isIP(a)) ?? [];
    const rrs = (ips.length ? ips : (dns?.clusterIPs ?? [])).map((ip) => addressRr(name, ip, ttl));
    return { rrs, exists: true, owners: [key], stable: true };
  }
  // `<ns>` alone: CoreDNS answers NODATA for an exposed namespace, whatever it holds.
  if (!isNamespaceExposed(top, view)) return none(false, true);
  if (n === 1) return none(true, true);
  const key = serviceKey(top, below[n - 2] as string);
  const service = view.state.serviceByKey(key);
  const owned = (rrs: Rr[] | undefined, exists = (rrs?.length ?? 0) > 0): NameRecords => ({
    rrs,
    exists,
    owners: [key],
    stable: true,
  });
  if (!service || n > 4) return owned(undefined, false);
  const base = toFqdn(`${service.name}.${service.namespace}.${ext.zone}`);
  const externals = service.externalAddresses ?? [];
  const groups = view.state.groupsOf(key);
  const headless = ext.headless && externals.length === 0 && service.kind === 'headless';
  if (headless) {
    const endpoints = endpointsOf(service, groups);
    const target = (label: string) => toFqdn(`${label}.${base}`);
    const srvs = (owner: Fqdn, port?: string, protocol?: string, only?: string) =>
      endpoints.flatMap((e) =>
        only !== undefined && e.label !== only
          ? []
          : e.group.ports
              .filter((p) => matchesPort(p, port, protocol))
              .map((p) => srv(owner, p.port, target(e.label), ttl)),
      );
    if (n === 2)
      return owned([...endpoints.flatMap((e) => e.addresses.map((a) => addressRr(name, a, ttl))), ...srvs(name)]);
    const first = below[0] as string;
    if (n === 3) {
      if (first.startsWith('_')) return owned(undefined, false);
      const e = endpoints.filter((x) => x.label === first);
      return owned([
        ...e.flatMap((x) => x.addresses.map((a) => addressRr(name, a, ttl))),
        ...srvs(name, undefined, undefined, first),
      ]);
    }
    const second = below[1] as string;
    if (!first.startsWith('_') || !second.startsWith('_')) return owned(undefined, false);
    return owned(srvs(name, first.slice(1), second.slice(1)));
  }
  if (externals.length === 0) return owned(undefined, false);
  // An SRV target: the Service's own name, or the ingress host name.
  const targets = externals.map((a) => (isIP(a) ? base : toFqdn(a)));
  const srvs = (owner: Fqdn, port?: string, protocol?: string) =>
    service.ports
      .filter((p) => matchesPort(p, port, protocol))
      .flatMap((p) => [...new Set(targets)].map((t) => srv(owner, p.port, t, ttl)));
  // An ingress host name is a CNAME at the name, but CoreDNS answers an SRV question there with
  // the SRV records (targets the host name) rather than the alias.
  const records = externalRecords(name, externals, ttl).filter((r) => qtype !== QTYPE.SRV || r.type !== QTYPE.CNAME);
  if (n === 2) return owned([...records, ...srvs(name)]);
  const first = below[0] as string;
  const second = below[1] as string;
  if (n !== 4 || !first.startsWith('_') || !second.startsWith('_')) return owned(undefined, false);
  return owned(srvs(name, first.slice(1), second.slice(1)));
}

/**
 * PTRs of an external address, in a reverse zone k8s_external names: `<svc>.<ns>.<zone>` of each
 * Service holding it. Found by a walk over the Services, so never kept as stable.
 */
export function externalPtrTargets(view: ZoneView, address: string): { targets: Fqdn[]; owners: string[] } {
  const targets: Fqdn[] = [];
  const owners: string[] = [];
  const zones = view.external ?? [];
  if (zones.length === 0) return { targets, owners };
  for (const service of view.state.allServices()) {
    if (
      service.clusterset ||
      !service.externalAddresses?.includes(address) ||
      !isNamespaceExposed(service.namespace, view)
    )
      continue;
    owners.push(serviceKey(service.namespace, service.name));
    for (const e of zones) targets.push(toFqdn(`${service.name}.${service.namespace}.${e.zone}`));
  }
  return { targets, owners };
}

/**
 * Every record of an external zone but its SOA, for a zone transfer: the apex NS and its name
 * server's addresses, then each Service's names (CoreDNS's k8s_external Transfer).
 */
export function* externalZoneRecords(view: ZoneView, ext: ExternalZone): Generator<Rr> {
  const at = (name: string) => withSrvWeights(externalRecordsAt(view, ext, toFqdn(name)).rrs ?? []);
  yield* at(ext.zone).filter((r) => r.type === QTYPE.NS);
  yield* at(`ns1.${ext.apex}.${ext.zone}`);
  for (const service of view.state.allServices()) {
    if (service.clusterset || !isNamespaceExposed(service.namespace, view)) continue;
    const base = `${service.name}.${service.namespace}.${ext.zone}`;
    const records = at(base);
    if (records.length === 0) continue;
    yield* records;
    const key = serviceKey(service.namespace, service.name);
    const headless = ext.headless && !service.externalAddresses?.length && service.kind === 'headless';
    const ports = new Map<string, { name: string; protocol: string }>();
    const labels = new Set<string>();
    if (headless) {
      for (const e of endpointsOf(service, view.state.groupsOf(key))) {
        labels.add(e.label);
        for (const p of e.group.ports) if (p.name) ports.set(`${p.name}/${p.protocol}`, p);
      }
    } else for (const p of service.ports) if (p.name) ports.set(`${p.name}/${p.protocol}`, p);
    for (const p of ports.values()) yield* at(`_${p.name}._${p.protocol}.${base}`);
    for (const label of labels) yield* at(`${label}.${base}`);
  }
}
