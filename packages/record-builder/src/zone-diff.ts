import { type Fqdn, isInZone, type Rr, toFqdn } from '@cluster-dns/wire';
import { clockedResourceId } from './cluster-clock.js';
import { type EndpointGroup, type ServiceInfo, serviceKey } from './cluster-model.js';
import { ZONE_BIT } from './cluster-state.js';
import { ownerRecords } from './owner-records.js';
import { withSrvWeights } from './service-records.js';
import type { JournalEntry } from './zone-journal.js';
import { recordsAt } from './zone-records.js';
import type { ZoneView } from './zone-view.js';

/** What an IXFR reply lists between its SOAs. */
export interface ZoneDiff {
  readonly deleted: Rr[];
  readonly added: Rr[];
}

const IN_ADDR = toFqdn('in-addr.arpa');
const IP6 = toFqdn('ip6.arpa');

/**
 * Whether an entry may have changed the zone: its zones are known and the zone is not among them
 * (a ClusterIP Service's endpoints touch the cluster zone alone). An unchanged zone's transfer, a
 * node cache's SOA check of ip6.arpa every 5 s, then costs a walk of the entries, not every
 * changed Service's records built twice.
 */
function touches(view: ZoneView, zone: Fqdn): (entry: JournalEntry) => boolean {
  const bit =
    zone === view.zone
      ? ZONE_BIT.cluster
      : view.clustersetZone && zone === view.clustersetZone
        ? ZONE_BIT.clusterset
        : isInZone(zone, IN_ADDR)
          ? ZONE_BIT.inAddr
          : isInZone(zone, IP6)
            ? ZONE_BIT.ip6
            : undefined;
  return (entry) => bit === undefined || entry.zones === undefined || (entry.zones & bit) !== 0;
}

const rrKey = (rr: Rr) =>
  `${rr.name}|${rr.type}|${rr.address ?? ''}|${rr.target ?? ''}|${rr.port ?? ''}|${rr.priority ?? ''}|${rr.weight ?? ''}|${rr.text?.join('\u0000') ?? ''}`;

/** Sorted, once each: replicas holding the same state send the same bytes. Keys made once each. */
function sorted(rrs: readonly Rr[]): Rr[] {
  const keyed = rrs.map((rr) => ({ key: rrKey(rr), rr }));
  keyed.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  const out: Rr[] = [];
  for (let i = 0; i < keyed.length; i++)
    if (i === 0 || (keyed[i - 1] as { key: string }).key !== (keyed[i] as { key: string }).key)
      out.push((keyed[i] as { rr: Rr }).rr);
  return out;
}

/**
 * The exact difference (RFC 1995) between the zone at a serial this replica made and now, for a
 * secondary that holds exactly that version: for every name a change touched, what was there
 * before the first of those changes against what is there now. Net, so a record changed and
 * changed back is in neither list. A name may hold records of several Services (a PTR of an
 * address two Services' endpoints share): its records then were those of the Services that did
 * not change, as now, and those of the Services that did, as they were.
 */
export function exactDiff(view: ZoneView, zone: Fqdn, entries: readonly JournalEntry[]): ZoneDiff {
  const whole = new Map<Fqdn, readonly Rr[]>();
  const then = new Map<Fqdn, Rr[]>();
  const now = new Map<Fqdn, Rr[]>();
  const add = (into: Map<Fqdn, Rr[]>, name: Fqdn, rrs: readonly Rr[]) => {
    if (!isInZone(name, zone)) return;
    if (!then.has(name)) then.set(name, []);
    if (!now.has(name)) now.set(name, []);
    (into.get(name) as Rr[]).push(...withSrvWeights(rrs));
  };
  const owners = new Set<string>();
  const changes = touches(view, zone);
  for (const entry of entries) {
    if (!changes(entry)) continue;
    if (entry.kind === 'names') {
      for (const [name, rrs] of entry.before)
        if (isInZone(name, zone) && !whole.has(name)) whole.set(name, withSrvWeights(rrs));
      continue;
    }
    if (owners.has(entry.owner)) continue;
    owners.add(entry.owner);
    for (const [name, rrs] of ownerRecords(view, entry.service, entry.groups)) add(then, name, rrs);
    const current = view.state.serviceByKey(entry.owner);
    for (const [name, rrs] of ownerRecords(view, current, [...view.state.groupsOf(entry.owner)])) add(now, name, rrs);
  }
  const deleted: Rr[] = [];
  const added: Rr[] = [];
  for (const name of new Set([...whole.keys(), ...then.keys()])) {
    const current = withSrvWeights(recordsAt(view, zone, name).rrs ?? []);
    let old = whole.get(name);
    if (!old) {
      const changedNow = new Set((now.get(name) ?? []).map(rrKey));
      old = [...current.filter((rr) => !changedNow.has(rrKey(rr))), ...(then.get(name) ?? [])];
    }
    const currentKeys = new Set(current.map(rrKey));
    const oldKeys = new Set(old.map(rrKey));
    for (const rr of old) if (!currentKeys.has(rrKey(rr))) deleted.push(rr);
    for (const rr of current) if (!oldKeys.has(rrKey(rr))) added.push(rr);
  }
  return { deleted: sorted(deleted), added: sorted(added) };
}

/**
 * The names a cache of our answers must drop, as an IXFR reply: our forwarders do not hold a
 * version of the zone, but answers asked at any moment, and drop every name a transfer lists. A
 * name is listed with every record it had in any version considered that it has not now
 * (deleted) and every record it has now (added).
 */
function evictions(view: ZoneView, zone: Fqdn) {
  const old = new Map<Fqdn, Map<string, Rr>>();
  const touched = new Set<Fqdn>();
  const seen = (name: Fqdn, rrs: readonly Rr[]) => {
    let at = old.get(name);
    if (!at) {
      at = new Map();
      old.set(name, at);
    }
    for (const rr of rrs) at.set(rrKey(rr), rr);
  };
  const sameSet = (a: readonly Rr[] | undefined, b: readonly Rr[] | undefined) => {
    const x = new Set((a ?? []).map(rrKey));
    const y = (b ?? []).map(rrKey);
    return x.size === new Set(y).size && y.every((k) => x.has(k));
  };
  return {
    /** An owner's records in a version against its records now: the names where they differ. */
    version(then: Map<Fqdn, Rr[]>, current: Map<Fqdn, Rr[]>) {
      for (const name of new Set([...then.keys(), ...current.keys()])) {
        if (!isInZone(name, zone)) continue;
        const was = withSrvWeights(then.get(name) ?? []);
        seen(name, was);
        if (!sameSet(was, withSrvWeights(current.get(name) ?? []))) touched.add(name);
      }
    },
    /** Names listed whatever they held. */
    touch(records: Map<Fqdn, Rr[]>) {
      for (const [name, rrs] of records) {
        if (!isInZone(name, zone)) continue;
        seen(name, withSrvWeights(rrs));
        touched.add(name);
      }
    },
    /** A name's whole record set in a version (pod records). */
    name(name: Fqdn, rrs: readonly Rr[]) {
      if (!isInZone(name, zone)) return;
      seen(name, rrs);
      if (!sameSet(rrs, recordsAt(view, zone, name).rrs)) touched.add(name);
    },
    diff(): ZoneDiff {
      const deleted: Rr[] = [];
      const added: Rr[] = [];
      for (const name of touched) {
        const current = withSrvWeights(recordsAt(view, zone, name).rrs ?? []);
        const keys = new Set(current.map(rrKey));
        for (const [key, rr] of old.get(name) ?? []) if (!keys.has(key)) deleted.push(rr);
        added.push(...current);
      }
      return { deleted: sorted(deleted), added: sorted(added) };
    },
  };
}

const currentOf = (view: ZoneView, owner: string) =>
  ownerRecords(view, view.state.serviceByKey(owner), [...view.state.groupsOf(owner)]);

/**
 * For a cache of our answers that this replica brought to a serial (its answers were all asked of
 * this replica since, so each was made in one of the states the journal's entries left): every
 * name whose records in any of those states differ from now, so an answer asked between two
 * transfers of a name that came and went again is dropped too.
 */
export function evictionsSince(view: ZoneView, zone: Fqdn, entries: readonly JournalEntry[]): ZoneDiff {
  const out = evictions(view, zone);
  const now = new Map<string, Map<Fqdn, Rr[]>>();
  const changes = touches(view, zone);
  for (const entry of entries) {
    if (!changes(entry)) continue;
    if (entry.kind === 'names') {
      for (const [name, rrs] of entry.before) out.name(name, rrs);
      continue;
    }
    let current = now.get(entry.owner);
    if (!current) {
      current = currentOf(view, entry.owner);
      now.set(entry.owner, current);
    }
    out.version(ownerRecords(view, entry.service, entry.groups), current);
  }
  return out.diff();
}

/**
 * For a cache another replica (or an earlier process) made, at a position on the cluster's clock
 * (cluster-clock.ts): `from` per resource the version up to which the cache has every change,
 * `upto` the highest it may have. Its answers were made in states this replica never passed
 * through (its watches delivered in another order), so every name the changed Services could have
 * had is listed: each version of a Service the cache may hold (at `from`, and after each change up
 * to `upto`) with every version of its endpoints it may hold, and the Service now. What is listed
 * follows from the events alone, so replicas that applied the same ones send the same bytes.
 * Undefined when the journal cannot say: a change here folded several events into one and the
 * cache may hold a state between them, or a change came without a resourceVersion.
 */
export function evictionsFrom(
  view: ZoneView,
  zone: Fqdn,
  entries: readonly JournalEntry[],
  from: ReadonlyMap<number, number>,
  upto: ReadonlyMap<number, number>,
): ZoneDiff | undefined {
  const out = evictions(view, zone);
  /** Per owner, per object (its Service, each slice): the versions the cache may hold. */
  const versions = new Map<string, Map<string, Array<ServiceInfo | EndpointGroup | undefined>>>();
  /** Whether the last change of an object seen so far was within what the cache may hold. */
  const lastWithin = new Map<string, boolean>();
  for (const entry of entries) {
    const at = entry.at;
    if (!at) return undefined;
    const id = clockedResourceId(at.resource);
    const since = id === undefined ? undefined : from.get(id);
    const limit = id === undefined ? undefined : upto.get(id);
    if (since === undefined || limit === undefined) return undefined;
    if (at.version <= since) continue;
    if (at.firstVersion < at.version && at.firstVersion <= limit) return undefined;
    if (entry.kind === 'names') {
      for (const [name, rrs] of entry.before) out.name(name, rrs);
      continue;
    }
    const service = at.resource === 'services' || at.resource === 'serviceimports';
    const object = service ? `service|${entry.owner}` : `slice|${at.key}`;
    let owned = versions.get(entry.owner);
    if (!owned) {
      owned = new Map();
      versions.set(entry.owner, owned);
    }
    let kept = owned.get(object);
    // The version before the object's first change since the cache's position is the cache's;
    // each later one the cache may hold if the change before it is within `upto`.
    if (!kept) {
      kept = [];
      owned.set(object, kept);
    } else if (!lastWithin.get(object)) kept = undefined;
    kept?.push(service ? entry.service : entry.groups.find((g) => serviceKey(g.namespace, g.name) === at.key));
    lastWithin.set(object, at.version <= limit);
  }
  for (const [owner, owned] of versions) {
    const services = new Set<ServiceInfo | undefined>([view.state.serviceByKey(owner)]);
    const groups = new Set<EndpointGroup>(view.state.groupsOf(owner));
    for (const [object, kept] of owned)
      for (const v of kept) {
        if (object.startsWith('service|')) services.add(v as ServiceInfo | undefined);
        else if (v) groups.add(v as EndpointGroup);
      }
    const every = [...groups];
    for (const service of services) out.touch(ownerRecords(view, service, every));
  }
  return out.diff();
}
