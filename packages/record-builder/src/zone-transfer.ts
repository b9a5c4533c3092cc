import type { Buffer } from 'node:buffer';
import {
  ednsOption,
  encodeProgrammingTimes,
  type Fqdn,
  isInZone,
  MessageWriter,
  type OpaqueRecord,
  optRecordWith,
  type ParsedQuery,
  PROGRAMMING_TIMES_OPTION,
  type ProgrammedChange,
  QCLASS,
  QTYPE,
  type Rr,
  toFqdn,
} from '@cluster-dns/wire';
import { type EndpointGroup, ownerKeyOf, type ServiceInfo } from './cluster-model.js';
import { SCHEMA_VERSION } from './cluster-state.js';
import { externalZoneOf, externalZoneRecords } from './external-records.js';
import { buildServiceRecords, type RecordSet, withSrvWeights } from './service-records.js';
import type { JournalEntry } from './zone-journal.js';
import {
  CLUSTERSET_SCHEMA_VERSION,
  nameServerName,
  nameServerRecords,
  nsRecord,
  recordsAt,
  soaRecord,
} from './zone-records.js';
import type { ZoneView } from './zone-view.js';

/** Records per message: small enough that a message stays far below 64 KiB. */
const RECORDS_PER_MESSAGE = 200;

/**
 * Every record one Service puts in the zones, by name: its own names and PTRs, and `ns.dns.<zone>`
 * when it is the DNS Service (`--dns-service`).
 */
export function ownerRecords(
  view: ZoneView,
  service: ServiceInfo | undefined,
  groups: readonly EndpointGroup[],
): RecordSet {
  if (!service) return new Map();
  const set = buildServiceRecords(service, groups, view);
  const dns = view.dnsService;
  if (dns && !service.clusterset && dns.namespace === service.namespace && dns.name === service.name) {
    const rrs = nameServerRecords(view, service.clusterIPs);
    if (rrs.length) set.set(nameServerName(view), rrs);
  }
  return set;
}

/** Every Service's records (its names, and its PTRs), generated from the store, with its key. */
export function* zoneContents(view: ZoneView): Generator<{ owner: string; records: RecordSet }> {
  const versions: RecordSet = new Map();
  const version = (zone: Fqdn, text: string) => {
    const name = toFqdn(`dns-version.${zone}`);
    versions.set(name, [{ name, type: QTYPE.TXT, class: QCLASS.IN, ttl: view.ttlSeconds, text: [text] }]);
  };
  version(view.zone, SCHEMA_VERSION);
  if (view.clustersetZone) version(view.clustersetZone, CLUSTERSET_SCHEMA_VERSION);
  yield { owner: '#schema', records: versions };
  for (const service of view.state.allServices()) {
    const owner = ownerKeyOf(service);
    yield { owner, records: ownerRecords(view, service, [...view.state.groupsOf(owner)]) };
  }
}

/**
 * Packs records into messages of RECORDS_PER_MESSAGE, the first with the question, as they come.
 * Written with wire's MessageWriter (names compressed), not dns2's encoder: a thousand node caches
 * catching up made zone transfers the record-builder's busiest work, and dns2 spent most of it.
 */
function* messagesOf(q: ParsedQuery, records: Iterable<Rr>, opt?: OpaqueRecord): Generator<Buffer> {
  let writer = new MessageWriter(4096);
  let count = 0;
  let first = true;
  const flags = { qr: true, opcode: 0, aa: true, tc: false, rd: q.rd, ra: false, ad: false, cd: false, rcode: 0 };
  writer.question(q.qname, q.qtype, q.qclass);
  const message = () => {
    // The OPT (when asked) in the first message only: it is read once per transfer.
    if (first && opt) writer.record(3, opt);
    const out = writer.finish(q.id, flags);
    writer = new MessageWriter(4096);
    count = 0;
    first = false;
    return out;
  };
  for (const rr of records) {
    writer.record(1, rr);
    if (++count === RECORDS_PER_MESSAGE) yield message();
  }
  if (count > 0 || first) yield message();
}

/** The zone's own records at its apex and below, as AXFR sends them (SOA first and last, RFC 5936). */
function* wholeZone(view: ZoneView, zone: Fqdn): Generator<Rr> {
  const soa = soaRecord(view, zone);
  yield soa;
  const external = externalZoneOf(view, zone);
  if (external) {
    yield* externalZoneRecords(view, external);
    yield soa;
    return;
  }
  yield nsRecord(view, zone);
  for (const { records: set } of zoneContents(view)) {
    for (const [name, rrs] of set) if (isInZone(name as Fqdn, zone)) yield* withSrvWeights(rrs);
  }
  yield soa;
}

/**
 * AXFR of one of our zones (the cluster zone or a reverse zone), made lazily: each message is
 * built when the connection has taken the last (wire's TCP connection pulls them), so a zone of
 * half a million records is never in memory whole, and a client that stops reading stops it.
 */
export function zoneTransfer(view: ZoneView, zone: Fqdn, q: ParsedQuery): Iterable<Buffer> {
  return { [Symbol.iterator]: () => messagesOf(q, wholeZone(view, zone)) };
}

const rrKey = (rr: Rr) =>
  `${rr.name}|${rr.type}|${rr.address ?? ''}|${rr.target ?? ''}|${rr.port ?? ''}|${rr.priority ?? ''}|${rr.weight ?? ''}|${rr.text?.join('\u0000') ?? ''}`;

/**
 * The records of `zone` deleted and added since the state the journal entries start from: for
 * every name a change touched, what was there before the first of those changes against what is
 * there now. Net, so a record changed back and forth is in neither list.
 */
export function zoneDiff(view: ZoneView, zone: Fqdn, entries: readonly JournalEntry[]): { deleted: Rr[]; added: Rr[] } {
  const before = new Map<Fqdn, readonly Rr[]>();
  const owners = new Set<string>();
  const keep = (name: Fqdn, rrs: readonly Rr[]) => {
    if (isInZone(name, zone) && !before.has(name)) before.set(name, withSrvWeights(rrs));
  };
  for (const entry of entries) {
    if (entry.kind === 'names') {
      for (const [name, rrs] of entry.before) keep(name, rrs);
      continue;
    }
    if (owners.has(entry.owner)) continue;
    owners.add(entry.owner);
    for (const [name, rrs] of ownerRecords(view, entry.service, entry.groups)) keep(name, rrs);
    // Names the Service has now and did not have before: nothing was there.
    const now = view.state.serviceByKey(entry.owner);
    for (const name of ownerRecords(view, now, [...view.state.groupsOf(entry.owner)]).keys()) keep(name, []);
  }
  const deleted: Rr[] = [];
  const added: Rr[] = [];
  for (const [name, old] of before) {
    const current = withSrvWeights(recordsAt(view, zone, name).rrs ?? []);
    const currentKeys = new Set(current.map(rrKey));
    const oldKeys = new Set(old.map(rrKey));
    for (const rr of old) if (!currentKeys.has(rrKey(rr))) deleted.push(rr);
    for (const rr of current) if (!oldKeys.has(rrKey(rr))) added.push(rr);
  }
  return { deleted, added };
}

/**
 * IXFR (RFC 1995) of one of our zones from the client's serial: one condensed step (current SOA,
 * the client's SOA, what was deleted, the current SOA, what was added, the current SOA); the
 * current SOA alone when the client is up to date; the whole zone, as AXFR, when the journal does
 * not reach back to the client's version (or there is no journal).
 */
export function incrementalTransfer(
  view: ZoneView,
  zone: Fqdn,
  q: ParsedQuery,
  clientSerial: number,
): { messages: Iterable<Buffer>; result: 'incremental' | 'full' | 'current' } {
  const current = soaRecord(view, zone);
  if (clientSerial === view.state.serial) return { messages: [...messagesOf(q, [current])], result: 'current' };
  // The journal keeps the cluster's names: an external zone is sent whole (RFC 1995 §4 allows it).
  if (externalZoneOf(view, zone)) return { messages: zoneTransfer(view, zone, q), result: 'full' };
  const entries = view.state.journal?.since(clientSerial, view.state.serial);
  if (!entries) return { messages: zoneTransfer(view, zone, q), result: 'full' };
  const { deleted, added } = zoneDiff(view, zone, entries);
  const theirs: Rr = { ...current, soa: { ...(current.soa as NonNullable<Rr['soa']>), serial: clientSerial } } as Rr;
  return {
    messages: [
      ...messagesOf(
        q,
        [current, theirs, ...deleted, current, ...added, current],
        programmingOpt(view, zone, q, entries),
      ),
    ],
    result: 'incremental',
  };
}

/**
 * The OPT carrying the trigger times of the changes a transfer brings, when the query asked for
 * them (programming-times.ts). The cluster zone's transfer only: a change's reverse-zone records
 * come by another transfer, and each change is timed once per instance.
 */
function programmingOpt(view: ZoneView, zone: Fqdn, q: ParsedQuery, entries: readonly JournalEntry[]) {
  if (zone !== view.zone || !asksProgrammingTimes(q)) return undefined;
  const changes: ProgrammedChange[] = [];
  for (const entry of entries) if (entry.kind === 'service' && entry.programmed) changes.push(entry.programmed);
  return optRecordWith(PROGRAMMING_TIMES_OPTION, encodeProgrammingTimes(changes));
}

/** Whether an IXFR query asks for the changes' trigger times: part of what its reply is kept by. */
export function asksProgrammingTimes(q: ParsedQuery): boolean {
  return q.edns !== undefined && ednsOption(q.raw, PROGRAMMING_TIMES_OPTION) !== undefined;
}
