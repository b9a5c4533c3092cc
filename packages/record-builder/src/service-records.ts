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
 * The records one published endpoint contributes (owner names and records, side by side), reused
 * while it is unchanged. Kept lean: there is one per endpoint, 100,000 in a large cluster.
 */
interface Fragment {
  readonly names: readonly Fqdn[];
  readonly rrs: readonly Rr[];
}

/**
 * Fragments of one Service's endpoints by endpoint identity. A rebuild takes the unchanged ones
 * from the last build instead of making their records again: an EndpointSlice event that flips
 * one endpoint of a hundred then allocates one endpoint's records, and the store's diff finds the
 * other names unchanged by identity.
 */
export interface FragmentCache {
  previous: ReadonlyMap<string, Fragment>;
  next: Map<string, Fragment>;
}

const portSignatures = new WeakMap<EndpointGroup, string>();
function portSignature(group: EndpointGroup): string {
  let sig = portSignatures.get(group);
  if (sig === undefined) {
    sig = group.ports.map((p) => `${p.name}/${p.protocol}/${p.port}`).join(',');
    portSignatures.set(group, sig);
  }
  return sig;
}

function endpointFragment(endpoint: EndpointInfo, group: EndpointGroup, base: Fqdn, ttl: number): Fragment {
  const names: Fqdn[] = [];
  const rrs: Rr[] = [];
  const add = (name: Fqdn, rr: Rr) => {
    names.push(name);
    rrs.push(rr);
  };
  const host = toFqdn(`${endpointLabel(endpoint)}.${base}`);
  for (const ip of endpoint.addresses) {
    add(base, addressRr(base, ip, ttl));
    add(host, addressRr(host, ip, ttl));
    if (endpoint.hostname)
      add(reverseNameOf(ip), { name: reverseNameOf(ip), type: QTYPE.PTR, class: QCLASS.IN, ttl, target: host });
  }
  // Endpoint ports come from the slice; a port the Service names but the slice lacks has no SRV.
  for (const p of group.ports) {
    add(base, srv(base, p.port, host, ttl));
    if (p.name) add(portOwner(p, base), srv(portOwner(p, base), p.port, host, ttl));
  }
  return { names, rrs };
}

/**
 * Records being built, with the data already at each name, so a duplicate (the same IP in two
 * endpoints, two endpoints with one hostname) is one record. The check uses strings the records
 * already hold, not new keys: this runs for every record of every rebuilt Service.
 */
class RecordSetBuilder {
  readonly set: RecordSet = new Map();
  private readonly seen = new Map<Fqdn, Map<string, Rr[]>>();

  push(name: Fqdn, rr: Rr): void {
    const data = rr.address ?? rr.target ?? '';
    let byData = this.seen.get(name);
    if (!byData) {
      byData = new Map();
      this.seen.set(name, byData);
      this.set.set(name, []);
    }
    const same = byData.get(data);
    if (same) {
      if (same.some((r) => r.type === rr.type && r.port === rr.port)) return;
      same.push(rr);
    } else byData.set(data, [rr]);
    (this.set.get(name) as Rr[]).push(rr);
  }
}

function srv(name: Fqdn, port: number, target: Fqdn, ttl: number): Rr {
  return { name, type: QTYPE.SRV, class: QCLASS.IN, ttl, priority: SRV_PRIORITY, weight: 0, port, target };
}

/**
 * SRV weights as kube-dns gives them: floor(100 / N) for the N records of one RRset. They depend
 * on the whole RRset, so stored records carry none and answers get them here, when encoded.
 */
export function withSrvWeights(rrs: readonly Rr[]): Rr[] {
  let count = 0;
  for (const r of rrs) if (r.type === QTYPE.SRV) count++;
  if (count === 0) return [...rrs];
  const weight = Math.floor(100 / count);
  return rrs.map((r) => (r.type === QTYPE.SRV && r.weight !== weight ? { ...r, weight } : r));
}

const portOwner = (p: ServicePort, base: Fqdn) => toFqdn(`_${p.name}._${p.protocol}.${base}`);

/** Builds the A/AAAA, SRV, CNAME and PTR records of one Service (spec schema 1.1.0). */
export function buildServiceRecords(
  service: ServiceInfo,
  groups: Iterable<EndpointGroup>,
  context: RecordContext,
  fragments: FragmentCache = { previous: new Map(), next: new Map() },
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
    return set;
  }

  // Headless: the endpoints themselves.
  for (const { endpoint, group } of publishedEndpoints(service, groups)) {
    const key = `${endpoint.hostname ?? ''}|${endpoint.addresses.join(',')}|${portSignature(group)}`;
    let fragment = fragments.next.get(key) ?? fragments.previous.get(key);
    if (!fragment) fragment = endpointFragment(endpoint, group, base, ttl);
    fragments.next.set(key, fragment);
    for (let i = 0; i < fragment.rrs.length; i++) builder.push(fragment.names[i] as Fqdn, fragment.rrs[i] as Rr);
  }
  return set;
}
