import { isIP } from 'node:net';
import { type Fqdn, QCLASS, QTYPE, type Rr, reverseNameOf, toFqdn } from '@cluster-dns/wire';
import type { EndpointGroup, ServiceInfo, ServicePort } from './cluster-model.js';
import { addressesOf, endpointLabel, isPublished } from './endpoint-group.js';

/** Every record one Service contributes to the zone, by owner name. */
export type RecordSet = Map<Fqdn, Rr[]>;

export interface RecordContext {
  /** The cluster zone, canonical: `cluster.local.`. */
  readonly zone: Fqdn;
  readonly ttlSeconds: number;
}

/** kube-dns's SRV priority; weights share 100 among the records of one RRset. */
export const SRV_PRIORITY = 10;

export const baseNameOf = (service: ServiceInfo, zone: Fqdn) =>
  toFqdn(`${service.name}.${service.namespace}.svc.${zone}`);
const portOwner = (p: ServicePort, base: Fqdn) => toFqdn(`_${p.name}._${p.protocol}.${base}`);

function addressRr(name: Fqdn, ip: string, ttl: number): Rr {
  return isIP(ip) === 6
    ? { name, type: QTYPE.AAAA, class: QCLASS.IN, ttl, address: ip }
    : { name, type: QTYPE.A, class: QCLASS.IN, ttl, address: ip };
}

function srv(name: Fqdn, port: number, target: Fqdn, ttl: number): Rr {
  return { name, type: QTYPE.SRV, class: QCLASS.IN, ttl, priority: SRV_PRIORITY, weight: 0, port, target };
}

/** Records at one name, a duplicate (the same IP in two endpoints, one hostname twice) kept once. */
class RecordList {
  readonly rrs: Rr[] = [];
  private readonly seen = new Set<string>();

  push(rr: Rr): void {
    const key = `${rr.type}|${rr.address ?? rr.target ?? ''}|${rr.port ?? ''}`;
    if (this.seen.has(key)) return;
    this.seen.add(key);
    this.rrs.push(rr);
  }
}

/** Each published endpoint of a headless Service: its group, index and label. */
function* publishedEndpoints(service: ServiceInfo, groups: Iterable<EndpointGroup>) {
  for (const group of groups) {
    for (let i = 0; i < group.count; i++) {
      if (isPublished(service, group, i)) yield { group, i };
    }
  }
}

/** The records at `<svc>.<ns>.svc.<zone>`: A/AAAA (cluster IPs or endpoints), SRV per port, or a CNAME. */
export function baseRecords(service: ServiceInfo, groups: Iterable<EndpointGroup>, ctx: RecordContext): Rr[] {
  const base = baseNameOf(service, ctx.zone);
  const out = new RecordList();
  const ttl = ctx.ttlSeconds;
  if (service.kind === 'external-name') {
    if (service.externalName)
      out.push({ name: base, type: QTYPE.CNAME, class: QCLASS.IN, ttl, target: toFqdn(service.externalName) });
    return out.rrs;
  }
  if (service.kind === 'cluster-ip') {
    for (const ip of service.clusterIPs) out.push(addressRr(base, ip, ttl));
    if (service.clusterIPs.length > 0) for (const p of service.ports) out.push(srv(base, p.port, base, ttl));
    return out.rrs;
  }
  for (const { group, i } of publishedEndpoints(service, groups)) {
    for (const ip of addressesOf(group, i)) out.push(addressRr(base, ip, ttl));
    const host = toFqdn(`${endpointLabel(group, i)}.${base}`);
    for (const p of group.ports) out.push(srv(base, p.port, host, ttl));
  }
  return out.rrs;
}

/** The records at `<label>.<svc>.<ns>.svc.<zone>` of a headless Service, or undefined when none. */
export function hostRecords(
  service: ServiceInfo,
  groups: Iterable<EndpointGroup>,
  label: string,
  ctx: RecordContext,
): Rr[] | undefined {
  if (service.kind !== 'headless') return undefined;
  const host = toFqdn(`${label}.${baseNameOf(service, ctx.zone)}`);
  const out = new RecordList();
  for (const { group, i } of publishedEndpoints(service, groups)) {
    if (endpointLabel(group, i) !== label) continue;
    for (const ip of addressesOf(group, i)) out.push(addressRr(host, ip, ctx.ttlSeconds));
  }
  return out.rrs.length ? out.rrs : undefined;
}

/** Every endpoint name of a headless Service and its records, in one pass (SRV glue). */
export function hostRecordsByLabel(
  service: ServiceInfo,
  groups: Iterable<EndpointGroup>,
  ctx: RecordContext,
): Map<string, Rr[]> {
  const base = baseNameOf(service, ctx.zone);
  const lists = new Map<string, RecordList>();
  if (service.kind !== 'headless') return new Map();
  for (const { group, i } of publishedEndpoints(service, groups)) {
    const label = endpointLabel(group, i);
    let list = lists.get(label);
    if (!list) {
      list = new RecordList();
      lists.set(label, list);
    }
    const host = toFqdn(`${label}.${base}`);
    for (const ip of addressesOf(group, i)) list.push(addressRr(host, ip, ctx.ttlSeconds));
  }
  return new Map([...lists].map(([label, list]) => [label, list.rrs]));
}

/** The SRV records at `_<port>._<proto>.<svc>.<ns>.svc.<zone>`, or undefined when none. */
export function portRecords(
  service: ServiceInfo,
  groups: Iterable<EndpointGroup>,
  portName: string,
  protocol: string,
  ctx: RecordContext,
): Rr[] | undefined {
  const base = baseNameOf(service, ctx.zone);
  const owner = toFqdn(`_${portName}._${protocol}.${base}`);
  const out = new RecordList();
  const matches = (p: ServicePort) => p.name !== '' && p.name === portName && p.protocol === protocol;
  if (service.kind === 'cluster-ip') {
    if (service.clusterIPs.length > 0)
      for (const p of service.ports) if (matches(p)) out.push(srv(owner, p.port, base, ctx.ttlSeconds));
  } else if (service.kind === 'headless') {
    for (const { group, i } of publishedEndpoints(service, groups)) {
      const host = toFqdn(`${endpointLabel(group, i)}.${base}`);
      for (const p of group.ports) if (matches(p)) out.push(srv(owner, p.port, host, ctx.ttlSeconds));
    }
  }
  return out.rrs.length ? out.rrs : undefined;
}

/** Whether `_<proto>.<svc>…` has names below it: an empty non-terminal (NODATA) rather than NXDOMAIN. */
export function protocolHasPorts(service: ServiceInfo, groups: Iterable<EndpointGroup>, protocol: string): boolean {
  if (service.kind === 'cluster-ip')
    return service.clusterIPs.length > 0 && service.ports.some((p) => p.name && p.protocol === protocol);
  if (service.kind !== 'headless') return false;
  for (const { group } of publishedEndpoints(service, groups))
    if (group.ports.some((p) => p.name && p.protocol === protocol)) return true;
  return false;
}

/**
 * The addresses a Service has PTR records for: its cluster IPs, or the addresses of its published
 * endpoints that have a hostname (spec §2.4.3). The reverse index is kept from these.
 */
export function ptrAddresses(service: ServiceInfo, groups: Iterable<EndpointGroup>): string[] {
  if (service.kind === 'cluster-ip') return [...service.clusterIPs];
  if (service.kind !== 'headless') return [];
  const out: string[] = [];
  for (const { group, i } of publishedEndpoints(service, groups)) {
    if (group.hostnames?.[i]) out.push(...addressesOf(group, i));
  }
  return out;
}

/** The names a Service's PTR records for `ip` point at (one per endpoint with that address). */
export function ptrTargets(
  service: ServiceInfo,
  groups: Iterable<EndpointGroup>,
  ip: string,
  ctx: RecordContext,
): Fqdn[] {
  const base = baseNameOf(service, ctx.zone);
  if (service.kind === 'cluster-ip') return service.clusterIPs.includes(ip) ? [base] : [];
  if (service.kind !== 'headless') return [];
  const out = new Set<Fqdn>();
  for (const { group, i } of publishedEndpoints(service, groups)) {
    const hostname = group.hostnames?.[i];
    if (hostname && addressesOf(group, i).includes(ip)) out.add(toFqdn(`${hostname}.${base}`));
  }
  return [...out];
}

/**
 * SRV weights as kube-dns gives them: floor(100 / N) for the N records of one RRset. They depend
 * on the whole RRset, so generated records carry none and answers get them here.
 */
export function withSrvWeights(rrs: readonly Rr[]): Rr[] {
  let count = 0;
  for (const r of rrs) if (r.type === QTYPE.SRV) count++;
  if (count === 0) return [...rrs];
  const weight = Math.floor(100 / count);
  return rrs.map((r) => (r.type === QTYPE.SRV && r.weight !== weight ? { ...r, weight } : r));
}

/**
 * Every record of one Service, by name (spec schema 1.1.0): for the zone transfer, the /cache dump
 * and change journals. Answers do not go through this: they build only the name asked.
 */
export function buildServiceRecords(
  service: ServiceInfo,
  groups: readonly EndpointGroup[],
  ctx: RecordContext,
): RecordSet {
  const set: RecordSet = new Map();
  const put = (name: Fqdn, rrs: Rr[] | undefined) => {
    if (rrs?.length) set.set(name, rrs);
  };
  const base = baseNameOf(service, ctx.zone);
  put(base, baseRecords(service, groups, ctx));
  if (service.kind === 'external-name') return set;
  const portKeys = new Map<string, ServicePort>();
  if (service.kind === 'cluster-ip')
    for (const p of service.ports) if (p.name) portKeys.set(`${p.name}/${p.protocol}`, p);
  if (service.kind === 'headless') {
    // One pass over the endpoints for every name below the Service (hosts, ports, PTRs): this
    // runs for zone transfers and change journals, over Services of hundreds of endpoints.
    const hosts = new Map<string, RecordList>();
    const ports = new Map<string, RecordList>();
    const ptrs = new Map<string, Set<Fqdn>>();
    for (const { group, i } of publishedEndpoints(service, groups)) {
      const label = endpointLabel(group, i);
      const host = toFqdn(`${label}.${base}`);
      let list = hosts.get(host);
      if (!list) {
        list = new RecordList();
        hosts.set(host, list);
      }
      const addresses = addressesOf(group, i);
      for (const ip of addresses) list.push(addressRr(host, ip, ctx.ttlSeconds));
      for (const p of group.ports) {
        if (!p.name) continue;
        const owner = portOwner(p, base);
        let srvs = ports.get(owner);
        if (!srvs) {
          srvs = new RecordList();
          ports.set(owner, srvs);
        }
        srvs.push(srv(owner, p.port, host, ctx.ttlSeconds));
      }
      const hostname = group.hostnames?.[i];
      if (hostname) {
        const target = toFqdn(`${hostname}.${base}`);
        for (const ip of addresses) {
          const targets = ptrs.get(ip) ?? new Set<Fqdn>();
          targets.add(target);
          ptrs.set(ip, targets);
        }
      }
    }
    for (const [host, list] of hosts) put(host as Fqdn, list.rrs);
    for (const [owner, list] of ports) put(owner as Fqdn, list.rrs);
    for (const [ip, targets] of ptrs) {
      const name = reverseNameOf(ip);
      put(
        name,
        [...targets].map((target): Rr => ({ name, type: QTYPE.PTR, class: QCLASS.IN, ttl: ctx.ttlSeconds, target })),
      );
    }
    return set;
  }
  for (const p of portKeys.values()) put(portOwner(p, base), portRecords(service, groups, p.name, p.protocol, ctx));
  for (const ip of new Set(ptrAddresses(service, groups))) {
    const name = reverseNameOf(ip);
    put(
      name,
      ptrTargets(service, groups, ip, ctx).map(
        (target): Rr => ({ name, type: QTYPE.PTR, class: QCLASS.IN, ttl: ctx.ttlSeconds, target }),
      ),
    );
  }
  return set;
}
