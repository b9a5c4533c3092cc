import {
  type Fqdn,
  ipv6Nibbles,
  type ProgrammedChange,
  QCLASS,
  QTYPE,
  type Rr,
  serialNewer,
  toFqdn,
} from '@cluster-dns/wire';
import { type AddressKey, addressKey, isIpv6Key, keyAddress } from './address-key.js';
import { ClusterClock } from './cluster-clock.js';
import {
  type EndpointGroup,
  importKey,
  isImportKey,
  ownerKeyOf,
  type PodInfo,
  type ServiceCidrInfo,
  type ServiceInfo,
  serviceKey,
} from './cluster-model.js';
import { reuseUnchanged } from './endpoint-group.js';
import { ServiceCidrs } from './service-cidrs.js';
import { ptrAddressKeys, type RecordContext } from './service-records.js';
import { SharedWords } from './shared-words.js';
import { type ChangeAt, type JournalEntry, ZoneJournal } from './zone-journal.js';

/** The DNS schema version this server implements (spec §2.1). */
export const SCHEMA_VERSION = '1.1.0';

/** Which zones a change touched, as bits: the cluster zone, in-addr.arpa, ip6.arpa, the clusterset zone. */
export const ZONE_BIT = { cluster: 1, inAddr: 2, ip6: 4, clusterset: 8 } as const;

/** A listener of changes: which Services' names changed, and in which zones (ZONE_BIT). */
export type ChangeListener = (owners: readonly string[], zones: number) => void;

/**
 * What the API has told us, in compact form, with the indexes answers need: Services, their
 * endpoint groups, namespaces with Services, and a reverse index from each address with a PTR
 * record to the Services that own it. No record is stored: answers are built from this on demand.
 * Every change bumps the SOA serial and tells `onChange` which Services' names changed, and in
 * which zones (so NOTIFY goes only for the zones that changed).
 */
export class ClusterState {
  private readonly services = new Map<string, ServiceInfo>();
  private readonly groups = new Map<string, EndpointGroup>();
  private readonly groupsByService = new Map<string, Map<string, EndpointGroup>>();
  private readonly namespaces = new Map<string, number>();
  /** Namespaces with ServiceImports, and how many: the clusterset zone's `<ns>.svc` names. */
  private readonly importNamespaces = new Map<string, number>();
  /** Address (address-key.ts) → the Services with a PTR for it (one key, or several). */
  private readonly ptrOwners = new Map<AddressKey, string | string[]>();
  private readonly ptrByService = new Map<string, readonly AddressKey[]>();
  /** Reverse-name prefixes with addresses below them ("10", "10.244", … or nibbles): empty non-terminals. */
  private readonly reversePrefixes = new Map<string, number>();
  /** Namespace → pod name → what the pod records and the client map need of it. */
  private readonly podIps = new Map<string, Map<string, PodEntry>>();
  /** Pod address → the pods that have it: one, or several while one ends and another starts, or hostNetwork pods. */
  private readonly podsByIp = new Map<string, PodEntry | PodEntry[]>();
  private readonly words = new SharedWords();
  private readonly serviceCidrs = new ServiceCidrs();
  private serialNumber: number;
  /** The cluster's clock as applied here: what the serial and the journal's positions come from. */
  readonly clock = new ClusterClock();
  /**
   * The API change being applied (set by the feed around each update): the journal entry and the
   * clock take it. Undefined for changes of our own (a flag's Service CIDR).
   */
  changeAt: ChangeAt | undefined;
  /** Set once the zones are answered: from then on the serial never goes back. */
  private served = false;
  /** Whether a change with a resourceVersion has set the serial yet. */
  private clockedChange = false;
  private endpoints = 0;
  /** Set by `keepJournal`: every change then leaves what it replaced here, for IXFR. */
  private journalOf: ZoneJournal | undefined;

  private readonly listeners: ChangeListener[] = [];

  constructor(
    readonly context: RecordContext & { readonly reverseZones: readonly Fqdn[] },
    onChange?: ChangeListener,
    private readonly now: () => number = Date.now,
  ) {
    this.serialNumber = Math.floor(now() / 1000) >>> 0;
    if (onChange) this.listeners.push(onChange);
  }

  /** Tells `listener` of every change from now on: which Services' names changed, in which zones. */
  onChange(listener: ChangeListener): void {
    this.listeners.push(listener);
  }

  /** Starts a change journal of at most `maxBytes` (IXFR and NOTIFY need one). */
  keepJournal(maxBytes: number): ZoneJournal {
    this.journalOf ??= new ZoneJournal(maxBytes, this.serialNumber, (dropped) => {
      if (dropped.at) this.clock.forgetBefore(dropped.at.resource, dropped.at.version);
    });
    return this.journalOf;
  }

  get journal(): ZoneJournal | undefined {
    return this.journalOf;
  }

  /** The SOA serial: moved forward by every change of the zone's data. */
  get serial(): number {
    return this.serialNumber;
  }

  /** The zones are answered from now on: their serial only moves forward (RFC 1982). */
  markServed(): void {
    // Nothing was applied with a version (an empty cluster): the serial starts from the clock
    // still, not from the time this process started, so replicas agree from their first change.
    if (this.clock.hasProgress() && !this.clockedChange) this.serialNumber = this.clock.sum();
    this.served = true;
    this.journalOf?.startServing(this.serialNumber);
  }

  /** Services and ServiceImports held. */
  get serviceCount(): number {
    return this.services.size;
  }

  /** Endpoints held, published or not. */
  get endpointCount(): number {
    return this.endpoints;
  }

  service(namespace: string, name: string): ServiceInfo | undefined {
    return this.services.get(serviceKey(namespace, name));
  }

  serviceByKey(key: string): ServiceInfo | undefined {
    return this.services.get(key);
  }

  allServices(): IterableIterator<ServiceInfo> {
    return this.services.values();
  }

  /** The endpoint groups of a Service (by its key). */
  groupsOf(key: string): Iterable<EndpointGroup> {
    return this.groupsByService.get(key)?.values() ?? [];
  }

  /** Keys (namespace/name) of what is held, by kind: what a new API worker's first list compares with. */
  serviceKeys(): string[] {
    return [...this.services.keys()].filter((key) => !isImportKey(key));
  }

  importKeys(): string[] {
    return [...this.services.values()].filter((s) => s.clusterset).map((s) => serviceKey(s.namespace, s.name));
  }

  /** A ServiceImport (the clusterset zone's Service). */
  serviceImport(namespace: string, name: string): ServiceInfo | undefined {
    return this.services.get(importKey(namespace, name));
  }

  groupKeys(): string[] {
    return [...this.groups.keys()];
  }

  podKeys(): string[] {
    return [...this.podIps].flatMap(([ns, byName]) => [...byName.keys()].map((name) => serviceKey(ns, name)));
  }

  hasServices(): boolean {
    return this.namespaces.size > 0;
  }

  namespaceHasServices(namespace: string): boolean {
    return this.namespaces.has(namespace);
  }

  hasImports(): boolean {
    return this.importNamespaces.size > 0;
  }

  namespaceHasImports(namespace: string): boolean {
    return this.importNamespaces.has(namespace);
  }

  /** The Services with a PTR record for this address (canonical text). */
  ptrOwnersOf(address: string): readonly string[] {
    const owners = this.ptrOwners.get(addressKey(address));
    return owners === undefined ? [] : typeof owners === 'string' ? [owners] : owners;
  }

  /** True when some address with a PTR lies below this reverse prefix (`10.244`, or nibbles `f.d.0.0`). */
  hasReversePrefix(prefix: string): boolean {
    return this.reversePrefixes.has(prefix);
  }

  /** Adds or replaces a Service, or a ServiceImport (`clusterset`: kept apart under importKey). */
  upsertService(update: ServiceInfo): void {
    const info = this.words.service(update);
    const key = ownerKeyOf(info);
    const counts = info.clusterset ? this.importNamespaces : this.namespaces;
    this.remember(key);
    if (!this.services.has(key)) counts.set(info.namespace, (counts.get(info.namespace) ?? 0) + 1);
    this.services.set(key, info);
    this.rebuilt(key);
  }

  deleteService(namespace: string, name: string): void {
    this.deleteOwner(serviceKey(namespace, name), this.namespaces, namespace);
  }

  deleteImport(namespace: string, name: string): void {
    this.deleteOwner(importKey(namespace, name), this.importNamespaces, namespace);
  }

  private deleteOwner(key: string, counts: Map<string, number>, namespace: string): void {
    if (!this.services.has(key)) return;
    this.remember(key);
    this.services.delete(key);
    const left = (counts.get(namespace) ?? 1) - 1;
    if (left > 0) counts.set(namespace, left);
    else counts.delete(namespace);
    this.rebuilt(key);
  }

  /**
   * Applies an EndpointSlice. Returns the change to time for the programming-latency SLI when it
   * carries a trigger time not seen before for this slice (a relist repeats the same one) and its
   * Service is known, as CoreDNS times it: a ClusterIP or headless Service (a slice with a trigger
   * time is the endpoint controller's, so the Service has a selector). The journal keeps it too,
   * for the forwarders' IXFR. `timed` false: the first list, whose trigger times are history,
   * not changes being programmed now. An imported slice belongs to its ServiceImport, and is not
   * timed: the SLI is about this cluster's changes.
   */
  upsertGroup(update: EndpointGroup, timed = true): ProgrammedChange | undefined {
    const key = serviceKey(update.namespace, update.name);
    const previous = this.groups.get(key);
    if (previous && (previous.serviceName !== update.serviceName || previous.clusterId !== update.clusterId))
      this.deleteGroup(update.namespace, update.name);
    const group = reuseUnchanged(this.groups.get(key), this.words.group(update));
    const owner = groupOwner(group);
    this.remember(owner);
    const service = this.services.get(owner);
    const kind = service?.clusterset
      ? undefined
      : service?.kind === 'cluster-ip'
        ? 'cluster_ip'
        : service?.kind === 'headless'
          ? 'headless_with_selector'
          : undefined;
    const programmed =
      timed && kind && group.triggerTimeMs && group.triggerTimeMs !== previous?.triggerTimeMs
        ? ({ kind, triggerMs: group.triggerTimeMs } as const)
        : undefined;
    if (programmed && this.pendingEntry?.kind === 'service') this.pendingEntry = { ...this.pendingEntry, programmed };
    this.endpoints += group.count - (this.groups.get(key)?.count ?? 0);
    this.groups.set(key, group);
    let byName = this.groupsByService.get(owner);
    if (!byName) {
      byName = new Map();
      this.groupsByService.set(owner, byName);
    }
    byName.set(key, group);
    this.rebuilt(owner);
    return programmed;
  }

  deleteGroup(namespace: string, name: string): void {
    const key = serviceKey(namespace, name);
    const previous = this.groups.get(key);
    if (!previous) return;
    const owner = groupOwner(previous);
    this.remember(owner);
    this.groups.delete(key);
    this.endpoints -= previous.count;
    const byName = this.groupsByService.get(owner);
    byName?.delete(key);
    if (byName?.size === 0) this.groupsByService.delete(owner);
    this.rebuilt(owner);
  }

  upsertPod(pod: PodInfo): void {
    const previous = this.podIps.get(pod.namespace)?.get(pod.name);
    this.rememberPods(pod.namespace, [...(previous?.ips ?? []), ...pod.ips]);
    let byName = this.podIps.get(pod.namespace);
    if (!byName) {
      byName = new Map();
      this.podIps.set(pod.namespace, byName);
    }
    if (previous) for (const ip of previous.ips) this.unindexPod(ip, previous);
    const entry: PodEntry = { namespace: pod.namespace, ips: pod.ips, searchDefault: pod.searchDefault };
    byName.set(pod.name, entry);
    for (const ip of pod.ips) this.indexPod(ip, entry);
    this.changed([], ZONE_BIT.cluster);
  }

  deletePod(namespace: string, name: string): void {
    const byName = this.podIps.get(namespace);
    const entry = byName?.get(name);
    if (entry) this.rememberPods(namespace, entry.ips);
    if (byName?.delete(name)) {
      if (entry) for (const ip of entry.ips) this.unindexPod(ip, entry);
      if (byName.size === 0) this.podIps.delete(namespace);
      this.changed([], ZONE_BIT.cluster);
    }
  }

  /**
   * A ServiceCIDR's blocks (or --service-cidr's). It changes no record, only which reverse names
   * are the cluster's to deny, so it is a change of both reverse zones with no names in it.
   */
  upsertServiceCidr(info: ServiceCidrInfo): void {
    if (!this.serviceCidrs.set(info)) return;
    if (this.journalOf) this.pendingEntry = { kind: 'names', before: new Map() };
    this.changed([], ZONE_BIT.inAddr | ZONE_BIT.ip6);
  }

  deleteServiceCidr(name: string): void {
    if (!this.serviceCidrs.delete(name)) return;
    if (this.journalOf) this.pendingEntry = { kind: 'names', before: new Map() };
    this.changed([], ZONE_BIT.inAddr | ZONE_BIT.ip6);
  }

  serviceCidrKeys(): string[] {
    // The flag's blocks are no object: a relist must not drop them.
    return this.serviceCidrs
      .names()
      .filter((name) => !name.startsWith('--'))
      .map((name) => `/${name}`);
  }

  /** The Service CIDR's reverse zone (`96.10.in-addr.arpa.`) `name` is in, inside `served`; else undefined. */
  serviceCidrZoneOf(name: Fqdn, served: Fqdn): Fqdn | undefined {
    return this.serviceCidrs.zoneOf(name, served);
  }

  /** True when a pod in `namespace` has this IP (for --pods=verified). */
  hasPodIp(namespace: string, ip: string): boolean {
    for (const entry of this.podIps.get(namespace)?.values() ?? []) if (entry.ips.includes(ip)) return true;
    return false;
  }

  /**
   * Who asks from this address, for the forwarders' server-side search: the namespace of the pods
   * that have it, and whether every one of them has the kubelet's default search path. Undefined
   * when no pod has it, or pods of two namespaces do (an ended pod's address reused before its
   * object is gone): then nobody's search path is walked for that address.
   */
  clientAt(ip: string): { namespace: string; searchDefault: boolean } | undefined {
    const at = this.podsByIp.get(ip);
    if (at === undefined) return undefined;
    if (!Array.isArray(at)) return { namespace: at.namespace, searchDefault: at.searchDefault };
    const namespace = (at[0] as PodEntry).namespace;
    if (at.some((pod) => pod.namespace !== namespace)) return undefined;
    return { namespace, searchDefault: at.every((pod) => pod.searchDefault) };
  }

  private indexPod(ip: string, entry: PodEntry): void {
    const at = this.podsByIp.get(ip);
    if (at === undefined) this.podsByIp.set(ip, entry);
    else if (!Array.isArray(at)) {
      if (at !== entry) this.podsByIp.set(ip, [at, entry]);
    } else if (!at.includes(entry)) at.push(entry);
  }

  private unindexPod(ip: string, entry: PodEntry): void {
    const at = this.podsByIp.get(ip);
    if (at === entry) this.podsByIp.delete(ip);
    else if (Array.isArray(at)) {
      const left = at.filter((pod) => pod !== entry);
      this.podsByIp.set(ip, left.length === 1 ? (left[0] as PodEntry) : left);
    }
  }

  hasPodsIn(namespace: string): boolean {
    return this.podIps.has(namespace);
  }

  /** A Service or one of its groups changed: refresh its reverse entries, then tell. */
  private rebuilt(owner: string): void {
    const service = this.services.get(owner);
    const next = service ? ptrAddressKeys(service, this.groupsOf(owner)) : [];
    const before = this.ptrByService.get(owner) ?? [];
    const moved = !sameList(before, next);
    // The reverse zones change when the addresses with a PTR do, or, for a headless Service, when
    // an endpoint's hostname may have (its PTR names it); a ClusterIP Service's PTR names only it.
    let zones: number = isImportKey(owner) ? ZONE_BIT.clusterset : ZONE_BIT.cluster;
    if (moved || service?.kind === 'headless')
      for (const ip of [...before, ...next]) zones |= isIpv6Key(ip) ? ZONE_BIT.ip6 : ZONE_BIT.inAddr;
    if (moved) {
      const keep = new Set(next);
      for (const ip of before) if (!keep.has(ip)) this.removePtr(ip, owner);
      const had = new Set(before);
      for (const ip of keep) if (!had.has(ip)) this.addPtr(ip, owner);
      if (next.length) this.ptrByService.set(owner, next);
      else this.ptrByService.delete(owner);
    }
    this.changed([owner], zones);
  }

  private addPtr(ip: AddressKey, owner: string): void {
    const owners = this.ptrOwners.get(ip);
    if (owners === undefined) {
      this.ptrOwners.set(ip, owner);
      this.countPrefixes(ip, 1);
    } else if (typeof owners === 'string') {
      if (owners !== owner) this.ptrOwners.set(ip, [owners, owner]);
    } else if (!owners.includes(owner)) owners.push(owner);
  }

  private removePtr(ip: AddressKey, owner: string): void {
    const owners = this.ptrOwners.get(ip);
    if (owners === owner) {
      this.ptrOwners.delete(ip);
      this.countPrefixes(ip, -1);
    } else if (Array.isArray(owners)) {
      const left = owners.filter((o) => o !== owner);
      this.ptrOwners.set(ip, left.length === 1 ? (left[0] as string) : left);
    }
  }

  private countPrefixes(ip: AddressKey, delta: number): void {
    for (const prefix of reversePrefixesOf(keyAddress(ip))) {
      const n = (this.reversePrefixes.get(prefix) ?? 0) + delta;
      if (n > 0) this.reversePrefixes.set(prefix, n);
      else this.reversePrefixes.delete(prefix);
    }
  }

  private changed(owners: readonly string[], zones: number): void {
    // The cluster's clock (the sum of the highest resourceVersions applied), so every replica that
    // applied the same events serves the same serial. Before the zones are answered it may jump
    // anywhere; after, it moves forward on every change: by one when the clock did not (a relist
    // brings objects in no order), so an IXFR client never sees an older serial.
    const at = this.changeAt;
    if (at) this.clock.applied(at.resource, at.version);
    const sum = this.clock.sum();
    const clocked = at !== undefined || sum !== 0;
    if (clocked) this.clockedChange = true;
    if (clocked && (!this.served || serialNewer(sum, this.serialNumber))) this.serialNumber = sum;
    else this.serialNumber = (this.serialNumber + 1) >>> 0;
    if (this.pendingEntry) {
      this.journalOf?.push({
        ...this.pendingEntry,
        serial: this.serialNumber,
        atMs: this.now(),
        at,
        zones,
      } as JournalEntry);
      this.pendingEntry = undefined;
    }
    for (const listener of this.listeners) listener(owners, zones);
  }

  private pendingEntry: PendingEntry | undefined;

  /** Keeps what a Service is now, before it changes (references only: the store's objects are immutable). */
  private remember(owner: string): void {
    if (!this.journalOf) return;
    this.pendingEntry = {
      kind: 'service',
      owner,
      service: this.services.get(owner),
      groups: [...this.groupsOf(owner)],
    };
  }

  /** Keeps the pod records (--pods=verified) at these addresses of a namespace, before a pod changes. */
  private rememberPods(namespace: string, ips: readonly string[]): void {
    if (!this.journalOf) return;
    const before = new Map<Fqdn, Rr[]>();
    for (const ip of new Set(ips)) {
      const dashed = ip.replace(/[.:]/g, '-');
      const name = toFqdn(`${dashed}.${namespace}.pod.${this.context.zone}`);
      before.set(name, this.hasPodIp(namespace, ip) ? [podRecord(name, ip, this.context.ttlSeconds)] : []);
      // The address's client record too, so a forwarder holding it drops it with this change.
      const client = clientName(ip, this.context.zone);
      const at = this.clientAt(ip);
      before.set(client, at ? [clientRecord(client, at, this.context.ttlSeconds)] : []);
    }
    this.pendingEntry = { kind: 'names', before };
  }
}

/**
 * The proper prefixes of an address in reverse-zone order, as the labels under in-addr.arpa or
 * ip6.arpa read from the zone down: 10.244.1.7 → "10", "10.244", "10.244.1"; IPv6 → nibbles.
 */
export function reversePrefixesOf(ip: string): string[] {
  const parts = ip.includes(':') ? ipv6Nibbles(ip).split('') : ip.split('.');
  return parts.slice(0, -1).map((_, i) => parts.slice(0, i + 1).join('.'));
}

/** The Service (or, for an imported slice, the ServiceImport) a group is part of. */
const groupOwner = (group: EndpointGroup) =>
  group.clusterId === undefined
    ? serviceKey(group.namespace, group.serviceName)
    : importKey(group.namespace, group.serviceName);

function sameList(a: readonly AddressKey[], b: readonly AddressKey[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** A journal entry before it has its serial and time. */
type PendingEntry = JournalEntry extends infer E ? (E extends unknown ? Omit<E, 'serial' | 'atMs'> : never) : never;

interface PodEntry {
  readonly namespace: string;
  readonly ips: readonly string[];
  readonly searchDefault: boolean;
}

/**
 * The client map's name for an address: `<a-b-c-d>.client.dns.<zone>` (IPv6 dashed as pod names
 * are). Under the cluster zone so it is pushed like any name there (NOTIFY, then IXFR naming it).
 */
export function clientName(ip: string, zone: Fqdn): Fqdn {
  return toFqdn(`${ip.replace(/[.:]/g, '-')}.${clientMapZone(zone)}`);
}

/** `client.dns.<zone>`: the client map's part of the zone, answered to this host only. */
export const clientMapZone = (zone: Fqdn): Fqdn => toFqdn(`client.dns.${zone}`);

/** The TXT record of a client-map name: `namespace=<ns>` and `search=default` or `search=own`. */
export function clientRecord(name: Fqdn, client: { namespace: string; searchDefault: boolean }, ttl: number): Rr {
  const text = [`namespace=${client.namespace}`, `search=${client.searchDefault ? 'default' : 'own'}`];
  return { name, type: QTYPE.TXT, class: QCLASS.IN, ttl, text };
}

/** The A or AAAA record of a pod name. */
export function podRecord(name: Fqdn, ip: string, ttl: number): Rr {
  return ip.includes(':')
    ? { name, type: QTYPE.AAAA, class: QCLASS.IN, ttl, address: ip }
    : { name, type: QTYPE.A, class: QCLASS.IN, ttl, address: ip };
}
