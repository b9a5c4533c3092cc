import type { FeedMarker, FeedUpdate } from './api-feed-protocol.js';

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

  get size(): number {
    return this.pending.size;
  }

  get coalesced(): number {
    return this.coalescedCount;
  }

  /** Whether a batch would carry anything. */
  get isEmpty(): boolean {
    return this.pending.size === 0 && this.markers.length === 0;
  }

  push(update: FeedUpdate): void {
    const key = `${update.resource}/${update.namespace}/${update.name}`;
    if (this.pending.delete(key)) this.coalescedCount++;
    this.pending.set(key, { ...update, seq: ++this.seq });
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
    }
    const due = this.pending.size === 0 ? this.markers.length : this.markers.findIndex((m) => m.afterSeq > lastSeq);
    const markers = this.markers
      .splice(0, due === -1 ? this.markers.length : due)
      .map(({ afterSeq: _, ...m }) => m as FeedMarker);
    const oldest = this.pending.values().next().value;
    return { updates, markers, pending: this.pending.size, oldestPendingMs: oldest?.readAtMs ?? 0 };
  }
}
