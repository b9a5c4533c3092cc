import { isIP } from 'node:net';
import { type Fqdn, QCLASS, QTYPE, type Rr, reverseNameOf, toFqdn } from '@cluster-dns/wire';
import type { EndpointGroup, EndpointInfo, ServiceInfo, ServicePort } from './cluster-model.js';

/** Every record one Service contributes to the zone, by owner name. */
export type RecordSet = Map<Fqdn, Rr[]>;

export interface RecordContext {
  /** The cluster zone, canonical: `cluster.local.`. */
  readonly zone: Fqdn;
  readonly ttlSeconds: number;
}

/** kube-dns's SRV priority; weights share 100 among the records of one RRset. */
export const SRV_PRIORITY = 10;

/** The endpoints of a Service that DNS publishes: ready ones, or all live ones with publishNotReady. */
export function publishedEndpoints(service: ServiceInfo, groups: Iterable<EndpointGroup>) {
  const out: Array<{ endpoint: EndpointInfo; group: EndpointGroup }> = [];
  for (const group of groups) {
    for (const endpoint of group.endpoints) {
      const published = service.publishNotReady ? !endpoint.terminating || endpoint.ready : endpoint.ready;
      if (published && endpoint.addresses.length > 0) out.push({ endpoint, group });
    }
  }
  return out;
}

/**
 * The label of an endpoint that has no hostname: its address with dashes (`10-244-1-11`,
 * `fd00--1`), as CoreDNS does. Stable for the endpoint's life and resolvable.
 */
export function endpointLabel(endpoint: EndpointInfo): string {
  return endpoint.hostname ?? (endpoint.addresses[0] as string).replace(/[.:]/g, '-');
}

function addressRr(name: Fqdn, ip: string, ttl: number): Rr {
  return { name, type: isIP(ip) === 6 ? QTYPE.AAAA : QTYPE.A, class: QCLASS.IN, ttl, address: ip };
}

/**
 * Records being built, with the data already at each name, so a duplicate (the same IP in two
 * endpoints) is one record. Keys are per name and short: this runs for every record of every
 * rebuilt Service.
 */
class RecordSetBuilder {
  readonly set: RecordSet = new Map();
  private readonly seen = new Map<Fqdn, Set<string>>();

  push(name: Fqdn, rr: Rr): void {
    const key = `${rr.type}|${rr.address ?? rr.target}|${rr.port ?? ''}`;
    const keys = this.seen.get(name);
    if (!keys) {
      this.seen.set(name, new Set([key]));
      this.set.set(name, [rr]);
      return;
    }
    if (keys.has(key)) return;
    keys.add(key);
    (this.set.get(name) as Rr[]).push(rr);
  }
}

function srv(name: Fqdn, port: number, target: Fqdn, ttl: number): Rr {
  return { name, type: QTYPE.SRV, class: QCLASS.IN, ttl, priority: SRV_PRIORITY, weight: 0, port, target };
}

/** After all SRVs of a name are known: weight = floor(100 / N), as kube-dns. */
function weighSrvs(set: RecordSet): void {
  for (const rrs of set.values()) {
    const srvs = rrs.filter((r) => r.type === QTYPE.SRV);
    for (const r of srvs) r.weight = Math.floor(100 / srvs.length);
  }
}

const portOwner = (p: ServicePort, base: Fqdn) => toFqdn(`_${p.name}._${p.protocol}.${base}`);

/** Builds the A/AAAA, SRV, CNAME and PTR records of one Service (spec schema 1.1.0). */
export function buildServiceRecords(
  service: ServiceInfo,
  groups: Iterable<EndpointGroup>,
  context: RecordContext,
): RecordSet {
  const builder = new RecordSetBuilder();
  const set = builder.set;
  const push = (name: Fqdn, rr: Rr) => builder.push(name, rr);
  const ttl = context.ttlSeconds;
  const base = toFqdn(`${service.name}.${service.namespace}.svc.${context.zone}`);

  if (service.kind === 'external-name') {
    if (service.externalName) {
      push(base, { name: base, type: QTYPE.CNAME, class: QCLASS.IN, ttl, target: toFqdn(service.externalName) });
    }
    return set;
  }

  if (service.kind === 'cluster-ip') {
    for (const ip of service.clusterIPs) {
      push(base, addressRr(base, ip, ttl));
      push(reverseNameOf(ip), { name: reverseNameOf(ip), type: QTYPE.PTR, class: QCLASS.IN, ttl, target: base });
    }
    if (service.clusterIPs.length > 0) {
      for (const p of service.ports) {
        push(base, srv(base, p.port, base, ttl));
        if (p.name) push(portOwner(p, base), srv(portOwner(p, base), p.port, base, ttl));
      }
    }
    weighSrvs(set);
    return set;
  }

  // Headless: the endpoints themselves.
  for (const { endpoint, group } of publishedEndpoints(service, groups)) {
    const host = toFqdn(`${endpointLabel(endpoint)}.${base}`);
    for (const ip of endpoint.addresses) {
      push(base, addressRr(base, ip, ttl));
      push(host, addressRr(host, ip, ttl));
      if (endpoint.hostname) {
        push(reverseNameOf(ip), { name: reverseNameOf(ip), type: QTYPE.PTR, class: QCLASS.IN, ttl, target: host });
      }
    }
    // Endpoint ports come from the slice; a port the Service names but the slice lacks has no SRV.
    for (const p of group.ports) {
      push(base, srv(base, p.port, host, ttl));
      if (p.name) push(portOwner(p, base), srv(portOwner(p, base), p.port, host, ttl));
    }
  }
  weighSrvs(set);
  return set;
}
