import type { StateFingerprint } from '@cluster-dns/wire';
import type { FeedMarker, FeedUpdate, ResourceName } from './api-feed-protocol.js';

export interface UpdateBatch {
  readonly updates: FeedUpdate[];
  /** The markers read before the last update of this batch (or all, when nothing is left). */
  readonly markers: FeedMarker[];
  /** Updates still waiting after this batch. */
  readonly pending: number;
  /** When the oldest update still waiting was read; 0 when none. */
  readonly oldestPendingMs: number;
}

/**
 * The API worker's updates waiting for the main thread, one per object: a later state of an
 * object replaces the one waiting (the latest state wins, counted as coalesced) and moves to the
 * back, so batches keep the order states were read in, and memory is bounded by the number of
 * objects however fast events come. Markers (synced, watching, …) keep their place in that order:
 * a batch carries those read before its last update, so `synced` never overtakes the list's objects.
 */
export class UpdateQueue {
  private readonly pending = new Map<string, FeedUpdate & { seq: number }>();
  private readonly markers: Array<FeedMarker & { afterSeq: number }> = [];
  private seq = 0;
  private coalescedCount = 0;
  /** Updates waiting, by resource: a resource's progress is told only when none of it waits. */
  private readonly waiting = new Map<ResourceName, number>();
  /** What each resource's stream has reached, not yet told. */
  private readonly progressOf = new Map<
    ResourceName,
    { version: number; fingerprint: StateFingerprint; listed: boolean; told: boolean }
  >();

  get size(): number {
    return this.pending.size;
  }

  get coalesced(): number {
    return this.coalescedCount;
  }

  /** Whether a batch would carry anything. */
  get isEmpty(): boolean {
    if (this.pending.size > 0 || this.markers.length > 0) return false;
    for (const p of this.progressOf.values()) if (!p.told) return false;
    return true;
  }

  push(update: FeedUpdate): void {
    const key = `${update.resource}/${update.namespace}/${update.name}`;
    const replaced = this.pending.get(key);
    if (replaced) {
      this.pending.delete(key);
      this.coalescedCount++;
    } else this.waiting.set(update.resource, (this.waiting.get(update.resource) ?? 0) + 1);
    // The first change folded in stays: a copy between the two versions saw only part of it.
    const firstVersion = replaced ? (replaced.firstVersion ?? replaced.version) : update.version;
    this.pending.set(key, { ...update, firstVersion, seq: ++this.seq });
  }

  /** The resource's stream has reached `version` (an event, a bookmark, a list's end). */
  progress(resource: ResourceName, version: number, fingerprint: StateFingerprint, listed: boolean): void {
    const before = this.progressOf.get(resource);
    this.progressOf.set(resource, {
      version,
      fingerprint,
      // A list's end is told even if a later event passes it before the worker can.
      listed: listed || (before !== undefined && !before.told && before.listed),
      told: false,
    });
  }

  mark(marker: FeedMarker): void {
    this.markers.push({ ...marker, afterSeq: this.seq });
  }

  /** Takes up to `max` updates, oldest first, and the markers due with them. */
  take(max: number): UpdateBatch {
    const updates: FeedUpdate[] = [];
    let lastSeq = 0;
    for (const [key, update] of this.pending) {
      if (updates.length >= max) break;
      this.pending.delete(key);
      const { seq, ...plain } = update;
      updates.push(plain);
      lastSeq = seq;
      this.waiting.set(update.resource, (this.waiting.get(update.resource) ?? 1) - 1);
    }
    const due = this.pending.size === 0 ? this.markers.length : this.markers.findIndex((m) => m.afterSeq > lastSeq);
    const markers = this.markers
      .splice(0, due === -1 ? this.markers.length : due)
      .map(({ afterSeq: _, ...m }) => m as FeedMarker);
    for (const [resource, p] of this.progressOf) {
      if (p.told || (this.waiting.get(resource) ?? 0) > 0) continue;
      p.told = true;
      markers.push({ kind: 'progress', resource, version: p.version, fingerprint: p.fingerprint, listed: p.listed });
    }
    const oldest = this.pending.values().next().value;
    return { updates, markers, pending: this.pending.size, oldestPendingMs: oldest?.readAtMs ?? 0 };
  }
}
