import type { Buffer } from 'node:buffer';
import {
  carriesEveryName,
  encodeNotifyChanges,
  encodeProgrammingTimes,
  type Fqdn,
  type ProgrammedChange,
} from '@cluster-dns/wire';
import { evictionsSince } from './zone-diff.js';
import type { ZoneView } from './zone-view.js';

/** What a NOTIFY to node caches carries: the changes' option data, and their trigger times. */
export interface NotifyChangesData {
  readonly data: Buffer;
  /** Every name is in `data`: a cache in step needs no fetch. */
  readonly complete: boolean;
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
 * serves the whole fleet. Not complete (the cache fetches) when the journal does not reach back to
 * the acknowledged serial, the cache has acknowledged none yet, or the names do not fit.
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
    let data: Buffer;
    let times: Buffer | undefined;
    const origin = view.state.clock.origin;
    const entries = from === undefined ? undefined : view.state.journal?.since(from, to);
    if (from === undefined || !entries) {
      data = encodeNotifyChanges({ origin, from: from ?? to, to, complete: false, names: [] }, zone, maxBytes);
    } else {
      const names = new Set<Fqdn>();
      if (entries.length) {
        const diff = evictionsSince(view, zone, entries);
        for (const rr of diff.deleted) names.add(rr.name as Fqdn);
        for (const rr of diff.added) names.add(rr.name as Fqdn);
      }
      data = encodeNotifyChanges({ origin, from, to, complete: true, names: [...names] }, zone, maxBytes);
      // The cluster zone's NOTIFY times its EndpointSlice changes, as its IXFR would.
      const programmed: ProgrammedChange[] = [];
      if (zone === view.zone)
        for (const entry of entries)
          if (entry.kind === 'service' && entry.programmed && programmed.length < PROGRAMMED_PER_NOTIFY)
            programmed.push(entry.programmed);
      if (programmed.length) times = encodeProgrammingTimes(programmed);
    }
    const made = { data, complete: carriesEveryName(data), ...(times ? { times } : {}) };
    memo.set(key, made);
    return made;
  };
}
