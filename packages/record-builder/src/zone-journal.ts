import type { Fqdn, ProgrammedChange, Rr } from '@cluster-dns/wire';
import type { ResourceName } from './api-feed-protocol.js';
import type { EndpointGroup, ServiceInfo } from './cluster-model.js';

/**
 * The API change an entry came from: which object of which resource, and the resourceVersions of
 * the first and last events folded into it (the API worker sends an object's latest state, so
 * several events may arrive as one). What lets a replica answer a copy made by another
 * (cluster-clock.ts).
 */
export interface ChangeAt {
  readonly resource: ResourceName;
  /** namespace/name of the object that changed (a Service, an EndpointSlice, a pod). */
  readonly key: string;
  readonly version: number;
  readonly firstVersion: number;
}

/**
 * One change of the zones, as the state was just before it. A Service change keeps references to
 * the Service and endpoint groups it replaced (immutable objects the store let go of: no copy is
 * made, and nothing is computed on the hot path); the records are built only when someone asks
 * for the difference (IXFR). Pod changes keep the records of the pod names they touched.
 */
export type JournalEntry =
  | {
      readonly serial: number;
      readonly atMs: number;
      readonly at?: ChangeAt;
      /** The zones it changed (cluster-state's ZONE_BIT), when known. */
      readonly zones?: number;
      readonly kind: 'service';
      readonly owner: string;
      readonly service: ServiceInfo | undefined;
      readonly groups: readonly EndpointGroup[];
      /** An EndpointSlice change with a trigger time: handed on with the IXFR (programming-times.ts). */
      readonly programmed?: ProgrammedChange;
    }
  | {
      readonly serial: number;
      readonly atMs: number;
      readonly at?: ChangeAt;
      readonly zones?: number;
      readonly kind: 'names';
      readonly before: ReadonlyMap<Fqdn, readonly Rr[]>;
    };

/** The EndpointSlice changes among `entries` that came with a trigger time, oldest first, up to `limit`. */
export function programmedIn(entries: readonly JournalEntry[], limit = Number.POSITIVE_INFINITY): ProgrammedChange[] {
  const out: ProgrammedChange[] = [];
  for (const entry of entries) {
    if (out.length >= limit) break;
    if (entry.kind === 'service' && entry.programmed) out.push(entry.programmed);
  }
  return out;
}

/** What an entry keeps alive, roughly: what bounds the journal. */
function entryBytes(entry: JournalEntry): number {
  // Its ChangeAt: an object and the object's key string.
  const at = entry.at ? 100 : 0;
  if (entry.kind === 'names') return at + 200 + entry.before.size * 150;
  let bytes = at + 300;
  for (const group of entry.groups) bytes += 200 + group.count * 48;
  return bytes;
}

/**
 * The changes of the zones keyed by SOA serial (every change bumps it by one), for IXFR
 * (RFC 1995): bounded by `maxBytes`, oldest dropped first. `since(serial)` gives the changes after
 * a version, or undefined when the journal no longer reaches back to it.
 */
export class ZoneJournal {
  private entries: JournalEntry[] = [];
  private head = 0;
  private bytes = 0;
  /** The serial of the state before the oldest kept entry: the oldest version we can diff from. */
  private floor: number;

  constructor(
    private readonly maxBytes: number,
    startSerial: number,
    /** Told each entry dropped to stay in bounds. */
    private readonly onDrop?: (entry: JournalEntry) => void,
  ) {
    this.floor = startSerial;
  }

  get size(): number {
    return this.entries.length - this.head;
  }

  get sizeBytes(): number {
    return this.bytes;
  }

  /** The oldest serial an IXFR can start from. */
  get oldestSerial(): number {
    return this.floor;
  }

  push(entry: JournalEntry): void {
    this.entries.push(entry);
    this.bytes += entryBytes(entry);
    while (this.bytes > this.maxBytes && this.head < this.entries.length - 1) {
      const dropped = this.entries[this.head++] as JournalEntry;
      this.bytes -= entryBytes(dropped);
      this.floor = dropped.serial;
      this.onDrop?.(dropped);
    }
    if (this.head > 1024 && this.head * 2 > this.entries.length) {
      this.entries = this.entries.slice(this.head);
      this.head = 0;
    }
  }

  /**
   * No serial before `serial` is answered from here on (the zones were not served before it, so no
   * copy has one). The entries stay: positions (cluster-clock.ts) reach back past it.
   */
  startServing(serial: number): void {
    this.floor = serial;
  }

  /** Every entry kept, oldest first. */
  all(): JournalEntry[] {
    return this.entries.slice(this.head);
  }

  /**
   * Entries with a serial above `serial`, oldest first; undefined when `serial` is older than the
   * journal, or newer than `current` (a version from before a restart: its history is gone).
   */
  since(serial: number, current: number): JournalEntry[] | undefined {
    if (serial < this.floor || serial > current) return undefined;
    const out: JournalEntry[] = [];
    for (let i = this.entries.length - 1; i >= this.head; i--) {
      const entry = this.entries[i] as JournalEntry;
      if (entry.serial <= serial) {
        // Serials step by the cluster's clock, not by one: a serial between two of ours is another
        // replica's (or another process's), and says nothing about what its holder has.
        if (entry.serial !== serial) return undefined;
        break;
      }
      out.push(entry);
    }
    if (out.length === this.size && serial !== this.floor) return undefined;
    return out.reverse();
  }
}
