import { type Fqdn, QCLASS, QTYPE, toFqdn } from '@cluster-dns/wire';
import { type EndpointGroup, type PodInfo, type ServiceInfo, serviceKey } from './cluster-model.js';
import { RecordIndex } from './record-index.js';
import { buildServiceRecords, type FragmentCache, type RecordContext } from './service-records.js';

/** The DNS schema version this server implements (spec §2.1). */
export const SCHEMA_VERSION = '1.1.0';

/**
 * What the informers have told us, and the records built from it. Each event rebuilds only the
 * records of the Service it concerns; `onChange` hears which names changed so ready answers for
 * them can be dropped.
 */
export class ClusterState {
  readonly index: RecordIndex;
  private readonly services = new Map<string, ServiceInfo>();
  private readonly groups = new Map<string, EndpointGroup>();
  private readonly groupsByService = new Map<string, Set<string>>();
  private readonly podIps = new Map<string, Map<string, readonly string[]>>();
  private readonly fragments = new Map<string, FragmentCache['previous']>();
  private serialNumber: number;

  constructor(
    private readonly context: RecordContext & { readonly reverseZones: readonly Fqdn[] },
    private readonly onChange: (names: readonly Fqdn[]) => void = () => {},
    private readonly now: () => number = Date.now,
  ) {
    this.index = new RecordIndex([context.zone, ...context.reverseZones]);
    this.serialNumber = Math.floor(now() / 1000) >>> 0;
    const version = toFqdn(`dns-version.${context.zone}`);
    this.index.replace(
      '#schema',
      new Map([
        [
          version,
          [{ name: version, type: QTYPE.TXT, class: QCLASS.IN, ttl: context.ttlSeconds, text: [SCHEMA_VERSION] }],
        ],
      ]),
    );
  }

  /** The SOA serial: bumped on every change of the zone's data. */
  get serial(): number {
    return this.serialNumber;
  }

  get serviceCount(): number {
    return this.services.size;
  }

  service(namespace: string, name: string): ServiceInfo | undefined {
    return this.services.get(serviceKey(namespace, name));
  }

  allServices(): IterableIterator<ServiceInfo> {
    return this.services.values();
  }

  upsertService(info: ServiceInfo): void {
    this.services.set(serviceKey(info.namespace, info.name), info);
    this.rebuild(serviceKey(info.namespace, info.name));
  }

  deleteService(namespace: string, name: string): void {
    if (this.services.delete(serviceKey(namespace, name))) this.rebuild(serviceKey(namespace, name));
  }

  upsertGroup(group: EndpointGroup): void {
    const key = serviceKey(group.namespace, group.name);
    const previous = this.groups.get(key);
    this.groups.set(key, group);
    const owner = serviceKey(group.namespace, group.serviceName);
    if (previous && previous.serviceName !== group.serviceName) this.detachGroup(previous, key);
    let set = this.groupsByService.get(owner);
    if (!set) {
      set = new Set();
      this.groupsByService.set(owner, set);
    }
    set.add(key);
    this.rebuild(owner);
  }

  deleteGroup(namespace: string, name: string): void {
    const key = serviceKey(namespace, name);
    const previous = this.groups.get(key);
    if (!previous) return;
    this.groups.delete(key);
    this.detachGroup(previous, key);
  }

  upsertPod(pod: PodInfo): void {
    let byName = this.podIps.get(pod.namespace);
    if (!byName) {
      byName = new Map();
      this.podIps.set(pod.namespace, byName);
    }
    byName.set(pod.name, pod.ips);
    this.changed([]);
  }

  deletePod(namespace: string, name: string): void {
    const byName = this.podIps.get(namespace);
    if (byName?.delete(name)) {
      if (byName.size === 0) this.podIps.delete(namespace);
      this.changed([]);
    }
  }

  /** True when a pod in `namespace` has this IP (for --pods=verified). */
  hasPodIp(namespace: string, ip: string): boolean {
    for (const ips of this.podIps.get(namespace)?.values() ?? []) if (ips.includes(ip)) return true;
    return false;
  }

  hasPodsIn(namespace: string): boolean {
    return this.podIps.has(namespace);
  }

  private detachGroup(group: EndpointGroup, key: string): void {
    const owner = serviceKey(group.namespace, group.serviceName);
    const set = this.groupsByService.get(owner);
    set?.delete(key);
    if (set?.size === 0) this.groupsByService.delete(owner);
    this.rebuild(owner);
  }

  private rebuild(owner: string): void {
    const service = this.services.get(owner);
    const groupKeys = this.groupsByService.get(owner) ?? new Set<string>();
    const groups = [...groupKeys].map((k) => this.groups.get(k)).filter((g): g is EndpointGroup => g !== undefined);
    const cache: FragmentCache = { previous: this.fragments.get(owner) ?? new Map(), next: new Map() };
    const next = service ? buildServiceRecords(service, groups, this.context, cache) : undefined;
    if (service && cache.next.size > 0) this.fragments.set(owner, cache.next);
    else this.fragments.delete(owner);
    const before = this.index.replace(owner, next);
    if (before.length === 0) return;
    // Answers for one name may carry records of the owner's other names (SRV targets in the
    // additional section), so every name the owner has or had is dropped.
    this.changed([...before, ...(next?.keys() ?? [])]);
  }

  private changed(names: readonly Fqdn[]): void {
    this.serialNumber = Math.max(this.serialNumber + 1, Math.floor(this.now() / 1000)) >>> 0;
    this.onChange(names);
  }
}
