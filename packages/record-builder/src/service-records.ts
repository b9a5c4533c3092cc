import { isIP } from 'node:net';
import { type Fqdn, QCLASS, QTYPE, type Rr, reverseNameOf, toFqdn } from '@cluster-dns/wire';
import { type AddressKey, addressKey, keyAddress } from './address-key.js';
import type { EndpointGroup, ServiceInfo, ServicePort } from './cluster-model.js';
import {
  addressAt,
  addressesOf,
  addressKeyAt,
  endpointLabel,
  hasAddress,
  hasHostname,
  hasLabel,
  isPublished,
  ptrLabelOf,
} from './endpoint-group.js';

/** Every record one Service contributes to the zone, by owner name. */
export type RecordSet = Map<Fqdn, Rr[]>;

export interface RecordContext {
  /** The cluster zone, canonical: `cluster.local.`. */
  readonly zone: Fqdn;
  /** The clusterset zone (`clusterset.local.`, KEP-1645), where ServiceImports have their names; unset, none. */
  readonly clustersetZone?: Fqdn;
  readonly ttlSeconds: number;
  /** A Corefile's `namespaces`: only these namespaces' Services are answered; unset, all. */
  readonly exposedNamespaces?: ReadonlySet<string>;
  /** A Corefile's `ignore empty_service`: a ClusterIP Service with no published endpoint is not answered. */
  readonly ignoreEmptyService?: boolean;
}

/** Whether the namespace's names are answered at all (`namespaces`). */
export const isNamespaceExposed = (namespace: string, ctx: RecordContext): boolean =>
  ctx.exposedNamespaces === undefined || ctx.exposedNamespaces.has(namespace);

/**
 * Whether a Service has names in the zone: its namespace is exposed, and, with `ignore
 * empty_service`, a ClusterIP Service has an endpoint to send traffic to (CoreDNS's reading:
 * a ready address, or a not-ready one its Service publishes).
 */
export function isAnswered(service: ServiceInfo, groups: Iterable<EndpointGroup>, ctx: RecordContext): boolean {
  if (!isNamespaceExposed(service.namespace, ctx)) return false;
  if (!ctx.ignoreEmptyService || service.kind !== 'cluster-ip') return true;
  for (const group of groups) for (let i = 0; i < group.count; i++) if (isPublished(service, group, i)) return true;
  return false;
}

/** kube-dns's SRV priority; weights share 100 among the records of one RRset. */
export const SRV_PRIORITY = 10;

/** `<svc>.<ns>.svc.<zone>`: in the cluster zone, or for a ServiceImport in the clusterset zone. */
export const baseNameOf = (service: ServiceInfo, ctx: RecordContext) =>
  toFqdn(`${service.name}.${service.namespace}.svc.${service.clusterset ? ctx.clustersetZone : ctx.zone}`);
const portOwner = (p: ServicePort, base: Fqdn) => toFqdn(`_${p.name}._${p.protocol}.${base}`);

function addressRr(name: Fqdn, ip: string, ttl: number): Rr {
  return isIP(ip) === 6
    ? { name, type: QTYPE.AAAA, class: QCLASS.IN, ttl, address: ip }
    : { name, type: QTYPE.A, class: QCLASS.IN, ttl, address: ip };
}

function srv(name: Fqdn, port: number, target: Fqdn, ttl: number): Rr {
  return { name, type: QTYPE.SRV, class: QCLASS.IN, ttl, priority: SRV_PRIORITY, weight: 0, port, target };
}

/**
 * Records at one name, a duplicate (the same IP in two endpoints, one hostname twice) kept once.
 * Answers of hundreds of records are built from these per query after a change: a short list is
 * checked by scanning it, a long one through an index of the data's existing strings, so a record
 * costs no key string of its own.
 */
export class RecordList {
  readonly rrs: Rr[] = [];
  /** By address or target: the record's port (SRV) or type, or several of them. */
  private index: Map<string, number | number[]> | undefined;

  push(rr: Rr): void {
    if (this.index === undefined) {
      for (const r of this.rrs) if (sameData(r, rr)) return;
      this.rrs.push(rr);
      if (this.rrs.length >= INDEX_FROM) {
        const index = new Map<string, number | number[]>();
        for (const r of this.rrs) remember(index, r);
        this.index = index;
      }
      return;
    }
    if (remember(this.index, rr)) this.rrs.push(rr);
  }
}

/** Adds a record's data to a list's index; false when the index held it already. */
function remember(index: Map<string, number | number[]>, rr: Rr): boolean {
  const key = dataKey(rr);
  const value = dataValue(rr);
  const seen = index.get(key);
  if (seen === undefined) index.set(key, value);
  else if (seen === value || (Array.isArray(seen) && seen.includes(value))) return false;
  else if (Array.isArray(seen)) seen.push(value);
  else index.set(key, [seen, value]);
  return true;
}

/** Lists shorter than this are searched; an index costs more than a scan of a few records. */
const INDEX_FROM = 8;
// Addresses and targets never collide as text (a target ends in a dot), so one map holds both.
const dataKey = (rr: Rr): string => rr.address ?? rr.target ?? '';
const dataValue = (rr: Rr): number => (rr.type === QTYPE.SRV ? rr.port : -rr.type);
const sameData = (a: Rr, b: Rr) =>
  a.type === b.type && a.address === b.address && a.target === b.target && a.port === b.port;

/** Calls `fn` for each published endpoint of a headless Service (a callback: no object per endpoint). */
function forEachPublished(
  service: ServiceInfo,
  groups: Iterable<EndpointGroup>,
  fn: (group: EndpointGroup, i: number) => void,
): void {
  for (const group of groups) {
    for (let i = 0; i < group.count; i++) if (isPublished(service, group, i)) fn(group, i);
  }
}

/** Calls `fn` for each address of endpoint i, without copying them out. */
function forEachAddress(group: EndpointGroup, i: number, fn: (ip: string) => void): void {
  const end = group.starts[i + 1] as number;
  for (let a = group.starts[i] as number; a < end; a++) fn(addressAt(group, a));
}

/**
 * The records at `<svc>.<ns>.svc.<zone>`: A/AAAA (cluster IPs or endpoints), SRV per port, or a
 * CNAME. With `addressesOnly`, a headless Service's SRV records are left out (an A or AAAA question
 * does not read them); the name still has records exactly when it would have without.
 */
export function baseRecords(
  service: ServiceInfo,
  groups: Iterable<EndpointGroup>,
  ctx: RecordContext,
  addressesOnly = false,
): Rr[] {
  const base = baseNameOf(service, ctx);
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
  // Every published endpoint has an address (packing drops those without), so addresses alone
  // decide whether the name exists.
  const push = (ip: string) => out.push(addressRr(base, ip, ttl));
  forEachPublished(service, groups, (group, i) => {
    forEachAddress(group, i, push);
    if (addressesOnly || group.ports.length === 0) return;
    const host = toFqdn(`${endpointLabel(group, i)}.${base}`);
    for (const p of group.ports) out.push(srv(base, p.port, host, ttl));
  });
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
  const host = toFqdn(`${label}.${baseNameOf(service, ctx)}`);
  const out = new RecordList();
  const push = (ip: string) => out.push(addressRr(host, ip, ctx.ttlSeconds));
  forEachPublished(service, groups, (group, i) => {
    if (hasLabel(group, i, label)) forEachAddress(group, i, push);
  });
  return out.rrs.length ? out.rrs : undefined;
}

/** Every endpoint name of a headless Service and its records, in one pass (SRV glue). */
export function hostRecordsByLabel(
  service: ServiceInfo,
  groups: Iterable<EndpointGroup>,
  ctx: RecordContext,
): ReadonlyMap<string, RecordList> {
  const lists = new Map<string, RecordList>();
  if (service.kind !== 'headless') return lists;
  const base = baseNameOf(service, ctx);
  forEachPublished(service, groups, (group, i) => {
    const label = endpointLabel(group, i);
    let list = lists.get(label);
    if (!list) {
      list = new RecordList();
      lists.set(label, list);
    }
    const host = toFqdn(`${label}.${base}`);
    // forEachAddress would need a closure per endpoint here (its host differs): the loop is inline.
    const end = group.starts[i + 1] as number;
    for (let a = group.starts[i] as number; a < end; a++)
      list.push(addressRr(host, addressAt(group, a), ctx.ttlSeconds));
  });
  return lists;
}

/** The SRV records at `_<port>._<proto>.<svc>.<ns>.svc.<zone>`, or undefined when none. */
export function portRecords(
  service: ServiceInfo,
  groups: Iterable<EndpointGroup>,
  portName: string,
  protocol: string,
  ctx: RecordContext,
): Rr[] | undefined {
  const base = baseNameOf(service, ctx);
  const owner = toFqdn(`_${portName}._${protocol}.${base}`);
  const out = new RecordList();
  const matches = (p: ServicePort) => p.name !== '' && p.name === portName && p.protocol === protocol;
  if (service.kind === 'cluster-ip') {
    if (service.clusterIPs.length > 0)
      for (const p of service.ports) if (matches(p)) out.push(srv(owner, p.port, base, ctx.ttlSeconds));
  } else if (service.kind === 'headless') {
    forEachPublished(service, groups, (group, i) => {
      let host: Fqdn | undefined;
      for (const p of group.ports) {
        if (!matches(p)) continue;
        host ??= toFqdn(`${endpointLabel(group, i)}.${base}`);
        out.push(srv(owner, p.port, host, ctx.ttlSeconds));
      }
    });
  }
  return out.rrs.length ? out.rrs : undefined;
}

/** Whether `_<proto>.<svc>…` has names below it: an empty non-terminal (NODATA) rather than NXDOMAIN. */
export function protocolHasPorts(service: ServiceInfo, groups: Iterable<EndpointGroup>, protocol: string): boolean {
  if (service.kind === 'cluster-ip')
    return service.clusterIPs.length > 0 && service.ports.some((p) => p.name && p.protocol === protocol);
  if (service.kind !== 'headless') return false;
  let found = false;
  forEachPublished(service, groups, (group) => {
    found ||= group.ports.some((p) => p.name && p.protocol === protocol);
  });
  return found;
}

/**
 * The addresses a Service has PTR records for: its cluster IPs, or the addresses of its published
 * endpoints that have a hostname (spec §2.4.3), as text (ptrAddressKeys decides which).
 */
export function ptrAddresses(service: ServiceInfo, groups: Iterable<EndpointGroup>): string[] {
  return ptrAddressKeys(service, groups).map(keyAddress);
}

/**
 * The addresses a Service has PTR records for, as the reverse index keys them (address-key.ts):
 * its cluster IPs, or the addresses of its published endpoints that have a hostname (spec §2.4.3).
 * Read in place from the groups: the index is refreshed on every change of a Service's endpoints,
 * and an IPv4 key needs no string.
 */
export function ptrAddressKeys(service: ServiceInfo, groups: Iterable<EndpointGroup>): AddressKey[] {
  if (service.kind === 'cluster-ip') return service.clusterIPs.map(addressKey);
  if (service.kind !== 'headless') return [];
  const out: AddressKey[] = [];
  forEachPublished(service, groups, (group, i) => {
    if (!hasHostname(group, i)) return;
    const end = group.starts[i + 1] as number;
    for (let a = group.starts[i] as number; a < end; a++) out.push(addressKeyAt(group, a));
  });
  return out;
}

/** The names a Service's PTR records for `ip` point at (one per endpoint with that address). */
export function ptrTargets(
  service: ServiceInfo,
  groups: Iterable<EndpointGroup>,
  ip: string,
  ctx: RecordContext,
): Fqdn[] {
  const base = baseNameOf(service, ctx);
  if (service.kind === 'cluster-ip') return service.clusterIPs.includes(ip) ? [base] : [];
  if (service.kind !== 'headless') return [];
  const out = new Set<Fqdn>();
  forEachPublished(service, groups, (group, i) => {
    const hostname = hasAddress(group, i, ip) ? ptrLabelOf(group, i) : undefined;
    if (hostname) out.add(toFqdn(`${hostname}.${base}`));
  });
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
  if (!isAnswered(service, groups, ctx)) return set;
  const put = (name: Fqdn, rrs: Rr[] | undefined) => {
    if (rrs?.length) set.set(name, rrs);
  };
  const base = baseNameOf(service, ctx);
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
    forEachPublished(service, groups, (group, i) => {
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
      const hostname = ptrLabelOf(group, i);
      if (hostname) {
        const target = toFqdn(`${hostname}.${base}`);
        for (const ip of addresses) {
          const targets = ptrs.get(ip) ?? new Set<Fqdn>();
          targets.add(target);
          ptrs.set(ip, targets);
        }
      }
    });
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
