import type { Buffer } from 'node:buffer';
import {
  carriesEveryName,
  encodeNotifyChanges,
  encodeProgrammingTimes,
  type Fqdn,
  serialNewer,
} from '@cluster-dns/wire';
import { evictionsSince } from './zone-diff.js';
import { type JournalEntry, programmedIn } from './zone-journal.js';
import type { ZoneView } from './zone-view.js';

/** What a NOTIFY to node caches carries: the changes' option data, and their trigger times. */
export interface NotifyChangesData {
  readonly data: Buffer;
  /** Every name is in `data`: a cache in step needs no fetch. */
  readonly complete: boolean;
  /** The serial it takes a cache in step to: the window's, or an earlier one when not all fit. */
  readonly to: number;
  readonly times?: Buffer;
}

/**
 * Trigger times per NOTIFY, the oldest (they bound the latency): the SLI is sampled, not counted,
 * under churn, and the NOTIFY stays one datagram (7 octets each).
 */
const PROGRAMMED_PER_NOTIFY = 16;

/**
 * The changes a node cache's NOTIFY carries (wire's notify-changes.ts): the names changed between
 * the serial the cache last acknowledged from us and now, as an IXFR from that serial would list
 * them (evictionsSince). Made once per zone, acknowledged serial and current serial, whatever the
 * number of caches: in a steady push every cache acknowledged the same serial, so one encoding
 * serves the whole fleet. When the names do not all fit, the oldest changes whose names do, to
 * their serial: a cache behind catches up a datagram a window. Not complete (the cache fetches)
 * when the journal does not reach back to the acknowledged serial, the cache has acknowledged none
 * yet, or the first change's names alone do not fit.
 */
export function createNotifyChanges(view: ZoneView, maxBytes?: number) {
  let at = -1;
  let memo = new Map<string, NotifyChangesData>();
  return (zone: Fqdn, from: number | undefined, to: number): NotifyChangesData => {
    if (to !== at) {
      at = to;
      memo = new Map();
    }
    const key = `${zone}|${from}`;
    const kept = memo.get(key);
    if (kept) return kept;
    const origin = view.state.clock.origin;
    const incomplete = (): NotifyChangesData => ({
      data: encodeNotifyChanges({ origin, from: from ?? to, to, complete: false, names: [] }, zone, maxBytes),
      complete: false,
      to,
    });
    // The journal's entries up to the window's serial: the state has moved on while it is sent.
    const since = from === undefined ? undefined : view.state.journal?.since(from, view.state.serial);
    let made: NotifyChangesData;
    if (from === undefined || !since) made = incomplete();
    else {
      let end = since.length;
      while (end > 0 && serialNewer((since[end - 1] as JournalEntry).serial, to)) end--;
      const upTo = since.slice(0, end);
      // All of them if their names fit, else as many of the oldest as do (a cache behind catches
      // up a datagram at a time, never by a transfer); a fetch only when the first alone does not.
      const attempt = (k: number) => carrying(view, zone, origin, from, upTo.slice(0, k), maxBytes);
      let best = attempt(upTo.length);
      if (!best.complete) {
        let lo = 0;
        let hi = upTo.length - 1;
        best = incomplete();
        while (lo < hi) {
          const mid = Math.ceil((lo + hi) / 2);
          const tried = attempt(mid);
          if (tried.complete) {
            best = tried;
            lo = mid;
          } else hi = mid - 1;
        }
      }
      made = best;
    }
    memo.set(key, made);
    return made;
  };
}

/** The names and trigger times of `entries`, from `from` to the last entry's serial. */
function carrying(
  view: ZoneView,
  zone: Fqdn,
  origin: Buffer,
  from: number,
  entries: readonly JournalEntry[],
  maxBytes: number | undefined,
): NotifyChangesData {
  const to = entries.length ? (entries.at(-1) as JournalEntry).serial : from;
  const names = new Set<Fqdn>();
  if (entries.length) {
    const diff = evictionsSince(view, zone, entries);
    for (const rr of diff.deleted) names.add(rr.name as Fqdn);
    for (const rr of diff.added) names.add(rr.name as Fqdn);
  }
  const data = encodeNotifyChanges({ origin, from, to, complete: true, names: [...names] }, zone, maxBytes);
  // The cluster zone's NOTIFY times its EndpointSlice changes, as its IXFR would.
  const programmed = zone === view.zone ? programmedIn(entries, PROGRAMMED_PER_NOTIFY) : [];
  return {
    data,
    complete: carriesEveryName(data),
    to,
    ...(programmed.length ? { times: encodeProgrammingTimes(programmed) } : {}),
  };
}
