import type { Buffer } from 'node:buffer';
import {
  decodeZonePosition,
  type EdnsOption,
  ednsOption,
  encodeProgrammingTimes,
  encodeZonePosition,
  type Fqdn,
  isInZone,
  MessageWriter,
  type OpaqueRecord,
  optRecordWithOptions,
  type ParsedQuery,
  PROGRAMMING_TIMES_OPTION,
  QCLASS,
  QTYPE,
  type Rr,
  toFqdn,
  ZONE_POSITION_OPTION,
  type ZonePosition,
} from '@cluster-dns/wire';
import { ownerKeyOf } from './cluster-model.js';
import { SCHEMA_VERSION } from './cluster-state.js';
import { externalZoneOf, externalZoneRecords } from './external-records.js';
import { ownerRecords } from './owner-records.js';
import { type RecordSet, withSrvWeights } from './service-records.js';
import { evictionsFrom, evictionsSince, exactDiff, type ZoneDiff } from './zone-diff.js';
import { type JournalEntry, programmedIn } from './zone-journal.js';
import { CLUSTERSET_SCHEMA_VERSION, nsRecord, soaRecord } from './zone-records.js';
import type { ZoneView } from './zone-view.js';

/** Records per message: small enough that a message stays far below 64 KiB. */
const RECORDS_PER_MESSAGE = 200;

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
export function zoneTransfer(view: ZoneView, zone: Fqdn, q: ParsedQuery, opt?: OpaqueRecord): Iterable<Buffer> {
  return { [Symbol.iterator]: () => messagesOf(q, wholeZone(view, zone), opt) };
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
  /** False over UDP, where the current SOA alone is the answer (RFC 1995 §2). */
  byPosition = true,
): { messages: Iterable<Buffer>; result: 'incremental' | 'full' | 'current'; foreign: boolean } {
  const current = soaRecord(view, zone);
  const clock = view.state.clock;
  const data = byPosition ? positionData(q) : undefined;
  const given = positionIn(data);
  // A copy another replica (or an earlier process) made: answered by its position, never by its
  // serial, which means nothing here even when it equals ours.
  const foreign = given && !clock.isOurs(given) ? given : undefined;
  const options: EdnsOption[] = [];
  // What we send tells where the copy stands after it; its holder hands it back next time.
  if (data !== undefined) options.push({ code: ZONE_POSITION_OPTION, data: encodeZonePosition(clock.position()) });
  const opt = () => (options.length ? optRecordWithOptions(options) : undefined);
  const whole = () => ({ messages: zoneTransfer(view, zone, q, opt()), result: 'full' as const, foreign: !!foreign });
  const up = () => ({ messages: [...messagesOf(q, [current], opt())], result: 'current' as const, foreign: !!foreign });
  if (!foreign && clientSerial === view.state.serial) return up();
  // The journal keeps the cluster's names: an external zone is sent whole (RFC 1995 §4 allows it).
  if (externalZoneOf(view, zone)) return whole();
  const journal = view.state.journal;
  let diff: ZoneDiff | undefined;
  if (foreign) {
    const start = clock.startsFrom(foreign);
    diff = start && journal && evictionsFrom(view, zone, journal.all(), start.from, start.upto);
  } else {
    const entries = journal?.since(clientSerial, view.state.serial);
    // Our forwarders (they send a position) cache answers asked at any moment, not a version.
    diff = entries && (given ? evictionsSince(view, zone, entries) : exactDiff(view, zone, entries));
    const times = entries && programmingTimes(view, zone, q, entries);
    if (times) options.unshift(times);
  }
  if (!diff) return whole();
  if (foreign && !diff.deleted.length && !diff.added.length) return up();
  const theirs: Rr = { ...current, soa: { ...(current.soa as NonNullable<Rr['soa']>), serial: clientSerial } } as Rr;
  return {
    messages: [...messagesOf(q, [current, theirs, ...diff.deleted, current, ...diff.added, current], opt())],
    result: 'incremental',
    foreign: !!foreign,
  };
}

/** The position option of an IXFR query: its data (empty: it asks for one), or undefined when absent. */
function positionData(q: ParsedQuery): Buffer | undefined {
  return q.edns === undefined ? undefined : ednsOption(q.raw, ZONE_POSITION_OPTION);
}

/** The position handed back (zone-position.ts), or undefined (none, or unreadable). */
const positionIn = (data: Buffer | undefined): ZonePosition | undefined =>
  data?.length ? decodeZonePosition(data) : undefined;

/**
 * What an IXFR reply depends on besides the question and serial: whether a position was asked
 * for, and another replica's position (ours are answered by serial).
 */
export function positionKey(view: ZoneView, q: ParsedQuery): string {
  const data = positionData(q);
  if (data === undefined) return '';
  const given = positionIn(data);
  return !given ? 'ask' : view.state.clock.isOurs(given) ? 'ours' : `p${data.toString('hex')}`;
}

/**
 * The trigger times of the changes a transfer brings, as an option, when the query asked for them
 * (programming-times.ts). The cluster zone's transfer only: a change's reverse-zone records come
 * by another transfer, and each change is timed once per instance.
 */
function programmingTimes(
  view: ZoneView,
  zone: Fqdn,
  q: ParsedQuery,
  entries: readonly JournalEntry[],
): EdnsOption | undefined {
  if (zone !== view.zone || !asksProgrammingTimes(q)) return undefined;
  return { code: PROGRAMMING_TIMES_OPTION, data: encodeProgrammingTimes(programmedIn(entries)) };
}

/** Whether an IXFR query asks for the changes' trigger times: part of what its reply is kept by. */
export function asksProgrammingTimes(q: ParsedQuery): boolean {
  return q.edns !== undefined && ednsOption(q.raw, PROGRAMMING_TIMES_OPTION) !== undefined;
}
