import type { Buffer } from 'node:buffer';
import { LRUCache } from 'lru-cache';

interface Entry {
  readonly wire: Buffer;
  readonly owners: readonly string[];
  readonly stable: boolean;
}

/** What an entry costs beyond its bytes: the key, the entry, the LRU's bookkeeping. */
const ENTRY_OVERHEAD_BYTES = 160;

/**
 * Ready-to-send answers (templates: ID 0, canonical question, no OPT), bounded by bytes, least
 * recently used out first. Each is tagged with the Services it was built from, so a change drops
 * exactly those; volatile ones (negative answers, the apex) go on any change.
 */
export class AnswerCache {
  private readonly byOwner = new Map<string, Set<string>>();
  private readonly volatile = new Set<string>();
  private readonly lru: LRUCache<string, Entry>;

  constructor(readonly maxBytes: number) {
    this.lru = new LRUCache<string, Entry>({
      maxSize: Math.max(maxBytes, 1024),
      sizeCalculation: (entry, key) => entry.wire.length + key.length * 2 + ENTRY_OVERHEAD_BYTES,
      dispose: (entry, key) => this.untag(key, entry),
    });
  }

  get size(): number {
    return this.lru.size;
  }

  get bytes(): number {
    return this.lru.calculatedSize;
  }

  get(key: string): Buffer | undefined {
    return this.lru.get(key)?.wire;
  }

  set(key: string, wire: Buffer, owners: readonly string[], stable: boolean): void {
    this.lru.set(key, { wire, owners, stable });
    if (!this.lru.has(key)) return;
    if (!stable) this.volatile.add(key);
    for (const owner of owners) {
      let keys = this.byOwner.get(owner);
      if (!keys) {
        keys = new Set();
        this.byOwner.set(owner, keys);
      }
      keys.add(key);
    }
  }

  /** Drops the answers built from these Services, and every volatile one. */
  invalidate(owners: readonly string[]): void {
    for (const owner of owners) {
      const keys = this.byOwner.get(owner);
      if (keys) for (const key of [...keys]) this.lru.delete(key);
    }
    for (const key of [...this.volatile]) this.lru.delete(key);
  }

  private untag(key: string, entry: Entry): void {
    if (!entry.stable) this.volatile.delete(key);
    for (const owner of entry.owners) {
      const keys = this.byOwner.get(owner);
      keys?.delete(key);
      if (keys?.size === 0) this.byOwner.delete(owner);
    }
  }
}
