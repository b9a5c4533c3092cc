import { Buffer } from 'node:buffer';
import { randomBytes } from 'node:crypto';
import {
  type Fqdn,
  HEADER_BYTES,
  isInZone,
  nameHashWith,
  type ParsedQuery,
  type PlainQuestion,
  readName,
  sameNameOctetsAt,
  toFqdn,
} from '@cluster-dns/wire';
import type { RouteKind } from '../../config/route-table.js';
import {
  type AnswerCache,
  type CacheCounts,
  type CachedAnswer,
  type CachedReply,
  type CacheHit,
  monotonicMs,
  remainingSecondsOf,
} from './cache.js';
import { SpinLock } from './spin-lock.js';

/**
 * The shared store's memory: one SharedArrayBuffer that every worker of a process maps, laid out as
 *
 *   meta    META_WORDS int32: the lock, the ring's head and tail, counts, the hash basis, the sizes
 *   index   a power of two of int32 slots: a record's ring position | 1, or 0
 *   hits    one int32 per index slot: hits on the record in that slot, for prefetch
 *   ring    a power of two of bytes: the records, written one after another and overwritten oldest first
 *
 * A record is 8-byte aligned: a header of HEADER_WORDS int32 (below), its TTL offsets, the hashes
 * of the names it holds, then the reply's wire bytes. A negative size is a filler to the ring's end.
 */
enum Meta {
  Lock = 0,
  Head = 1,
  Tail = 2,
  Insertions = 3,
  Evictions = 4,
  DenialEvictions = 5,
  Entries = 6,
  Denials = 7,
  /** Bumped under the lock by every drop: writeToken's value. */
  Drops = 8,
  Basis = 9,
  RingBytes = 10,
  IndexSlots = 11,
  MaxEntries = 12,
}
const META_WORDS = 16;

enum Rec {
  Size = 0,
  Hash = 1,
  Flags = 2,
  WireBytes = 3,
  NameEnd = 4,
  TtlSeconds = 5,
  PrefetchBelow = 6,
  RouteHash = 7,
  /** A float64 over words 8 and 9. */
  StoredAt = 8,
  TurnStart = 10,
  TurnSize = 11,
  TurnCount = 12,
  TtlCount = 13,
  NameCount = 14,
}
const HEADER_WORDS = 16;
const HEADER_BYTES_REC = HEADER_WORDS * 4;

const DEAD = 1;
const DENIAL = 2;
const DNSSEC_OK = 4;
const KIND_SHIFT = 4;
const KINDS: readonly RouteKind[] = ['server', 'stub', 'upstream', 'local'];

/** Index slots probed from a question's hash: a hit compares at most this many records. */
export const PROBES = 8;
/** A record bigger than this part of the ring is not kept: a few huge answers would flush the rest. */
const MAX_RECORD_SHARE = 8;

const align8 = (n: number) => (n + 7) & ~7;
const pow2AtLeast = (n: number) => 2 ** Math.ceil(Math.log2(Math.max(n, 1)));

export interface SharedAnswerSizing {
  /** At most this many entries (--cache-size). */
  maxEntries: number;
  /** Bytes of records at most: rounded up to a power of two. */
  ringBytes: number;
}

/** The ring's default size: room for `maxEntries` answers of this many bytes each (records' average, measured). */
export const RING_BYTES_PER_ENTRY = 320;

/** A new store as the forwarder's options size it (--cache-size entries, the ring after them). */
export function sharedStoreFor(options: { cacheSize: number; maxStaleSeconds: number }): SharedAnswerStore {
  const memory = createSharedAnswerMemory({
    maxEntries: options.cacheSize,
    ringBytes: options.cacheSize * RING_BYTES_PER_ENTRY,
  });
  return new SharedAnswerStore(memory, monotonicMs, options.maxStaleSeconds);
}

/** Makes the shared memory for a store of this size, to hand to every worker (workerData). */
export function createSharedAnswerMemory(sizing: SharedAnswerSizing): SharedArrayBuffer {
  const ringBytes = pow2AtLeast(Math.max(sizing.ringBytes, 64 * 1024));
  if (ringBytes > 2 ** 30) throw new RangeError(`a shared cache of ${ringBytes} bytes: at most 1 GiB`);
  // A quarter full at most: a question's PROBES slots are then all taken by others (and the oldest
  // of them evicted early) for about 1 in 100,000 answers; at half full it was 7 in 10,000.
  const indexSlots = pow2AtLeast(Math.max(4 * sizing.maxEntries, PROBES * 4));
  const bytes = align8((META_WORDS + indexSlots * 2) * 4) + ringBytes;
  const memory = new SharedArrayBuffer(bytes);
  const meta = new Int32Array(memory, 0, META_WORDS);
  meta[Meta.Basis] = randomBytes(4).readInt32BE(0);
  meta[Meta.RingBytes] = ringBytes;
  meta[Meta.IndexSlots] = indexSlots;
  meta[Meta.MaxEntries] = sizing.maxEntries;
  return memory;
}

/** What a hit reads: a view of a record in the ring, filled again by each findPlain. */
class RecordView implements CachedAnswer {
  wire: Buffer = Buffer.alloc(0);
  ttlOffsets: number[] = [];
  ttlSeconds = 0;
  storedAtMs = 0;
  routeKind: RouteKind = 'upstream';
  hits = 0;
  prefetchBelowSeconds = 0;
  denial = false;
  turn: { start: number; size: number; count: number } | undefined = undefined;
  /** Where it is: the ring position it was read at, and its index slot. */
  pos = 0;
  slot = 0;
}

/**
 * One cache for every worker of a process, in a SharedArrayBuffer (createSharedAnswerMemory):
 * answers as wire bytes with their expiry and the question they answer, an index by the
 * question's hash, eviction oldest-first bounded by bytes and by entries, and reads that never wait
 * for a writer. Writers (a miss's answer, a drop) take a spin lock; a reader copies a record out and
 * then checks the ring's tail has not passed it (a seqlock on the ring position: a writer moves the
 * tail before it overwrites), and a record whose bytes were overwritten meanwhile is a miss. Only
 * writers holding the lock write into the ring, so a reader's view can be torn but never cause a
 * write into another record.
 *
 * Eviction is first in, first out over the ring (the slot a new answer needs is the oldest's), not
 * LRU: a hit moves nothing, so hits never write shared memory but a hit count beside the index.
 */
export class SharedAnswerStore implements AnswerCache {
  private readonly meta: Int32Array;
  private readonly index: Int32Array;
  private readonly hitCounts: Int32Array;
  private readonly ring: Uint8Array;
  private readonly ring32: Int32Array;
  private readonly ring64: Float64Array;
  private readonly ringBuffer: Buffer;
  private readonly ringMask: number;
  private readonly indexMask: number;
  private readonly basis: number;
  private readonly lock: SpinLock;
  private readonly view = new RecordView();
  readonly maxEntries: number;
  readonly askedCase = true;

  constructor(
    readonly memory: SharedArrayBuffer,
    private readonly now: () => number = monotonicMs,
    private readonly maxStaleSeconds = 0,
  ) {
    this.meta = new Int32Array(memory, 0, META_WORDS);
    const ringBytes = this.meta[Meta.RingBytes] as number;
    const indexSlots = this.meta[Meta.IndexSlots] as number;
    this.index = new Int32Array(memory, META_WORDS * 4, indexSlots);
    this.hitCounts = new Int32Array(memory, (META_WORDS + indexSlots) * 4, indexSlots);
    const ringStart = align8((META_WORDS + indexSlots * 2) * 4);
    this.ring = new Uint8Array(memory, ringStart, ringBytes);
    this.ring32 = new Int32Array(memory, ringStart, ringBytes / 4);
    this.ring64 = new Float64Array(memory, ringStart, ringBytes / 8);
    this.ringBuffer = Buffer.from(memory, ringStart, ringBytes);
    this.ringMask = ringBytes - 1;
    this.indexMask = indexSlots - 1;
    this.basis = this.meta[Meta.Basis] as number;
    this.maxEntries = this.meta[Meta.MaxEntries] as number;
    this.lock = new SpinLock(this.meta, Meta.Lock);
  }

  /** Bytes the ring holds at most (records and fillers). */
  get ringBytes(): number {
    return this.ring.length;
  }

  /** Bytes of the ring in use now (live, dead and filler records between tail and head). */
  get usedBytes(): number {
    return (Atomics.load(this.meta, Meta.Head) - Atomics.load(this.meta, Meta.Tail)) >>> 0;
  }

  get size(): number {
    return Atomics.load(this.meta, Meta.Entries);
  }

  get denialEntries(): number {
    return Atomics.load(this.meta, Meta.Denials);
  }

  get counts(): Readonly<CacheCounts> {
    return {
      insertions: Atomics.load(this.meta, Meta.Insertions),
      evictions: Atomics.load(this.meta, Meta.Evictions),
      denialEvictions: Atomics.load(this.meta, Meta.DenialEvictions),
    };
  }

  remainingSeconds(entry: CachedAnswer): number {
    return remainingSecondsOf(entry, this.now());
  }

  /** The hash a question is indexed by: its name in any case, its type and class, and the DO bit. */
  questionHash(octets: Uint8Array, nameEnd: number, dnssecOk: boolean): number {
    const nameHash = nameHashWith(this.basis, octets, HEADER_BYTES, nameEnd);
    const typeClass =
      (((octets[nameEnd] as number) << 24) |
        ((octets[nameEnd + 1] as number) << 16) |
        ((octets[nameEnd + 2] as number) << 8) |
        (octets[nameEnd + 3] as number)) >>>
      0;
    const hash = Math.imul(nameHash ^ typeClass, 0x01000193) ^ (dnssecOk ? 0x5bd1e995 : 0);
    return hash === 0 ? 1 : hash;
  }

  findPlain(raw: Buffer, q: PlainQuestion): CachedAnswer | undefined {
    const nameEnd = q.questionEnd - 4;
    return this.find(raw, nameEnd, q.dnssecOk, this.questionHash(raw, nameEnd, q.dnssecOk));
  }

  confirm(entry: CachedAnswer): boolean {
    return this.live((entry as RecordView).pos);
  }

  countHit(entry: CachedAnswer): void {
    const view = entry as RecordView;
    // A count beside the index, never in the ring: a slot taken by another record meanwhile only
    // gets one hit too many. The caller's copy counts it too, as a per-worker entry would.
    view.hits = Atomics.add(this.hitCounts, view.slot, 1) + 1;
  }

  lookup(q: ParsedQuery): CacheHit | undefined {
    const dnssecOk = q.edns?.dnssecOk === true;
    const nameEnd = q.questionEnd - 4;
    const view = this.find(q.raw, nameEnd, dnssecOk, this.questionHash(q.raw, nameEnd, dnssecOk));
    if (view === undefined) return undefined;
    // Copied out: the slow path keeps the entry across awaits (serve-stale), when the ring moves on.
    const entry: CachedAnswer & { pos: number; slot: number } = {
      ...view,
      wire: Buffer.from(view.wire),
      ttlOffsets: [...view.ttlOffsets],
    };
    if (!this.live(view.pos)) return undefined;
    const remainingSeconds = this.remainingSeconds(entry);
    if (remainingSeconds > 0) return { entry, remainingSeconds, stale: false };
    if (-remainingSeconds < this.maxStaleSeconds) return { entry, remainingSeconds: 0, stale: true };
    return undefined;
  }

  writeToken(): number {
    return Atomics.load(this.meta, Meta.Drops);
  }

  set(entry: CachedReply, token?: number): void {
    if (this.maxEntries <= 0) return;
    const { wire, ttlOffsets, names } = entry;
    const size = align8(HEADER_BYTES_REC + 4 * (ttlOffsets.length + names.length) + wire.length);
    if (size > this.ring.length / MAX_RECORD_SHARE) return;
    const hash = this.questionHash(wire, entry.nameEnd, entry.key.dnssecOk);
    const nameHashes = names.map((name) => this.stringHash(name));
    const routeHash = this.stringHash(entry.routeId);
    this.lock.acquire();
    try {
      if (token !== undefined && token !== Atomics.load(this.meta, Meta.Drops)) return;
      const slot = this.slotFor(hash, wire, entry.nameEnd, entry.key.dnssecOk);
      const pos = this.reserve(size);
      const p = pos & this.ringMask;
      const w = p >> 2;
      const r32 = this.ring32;
      r32[w + Rec.Hash] = hash;
      r32[w + Rec.WireBytes] = wire.length;
      r32[w + Rec.NameEnd] = entry.nameEnd;
      r32[w + Rec.TtlSeconds] = entry.ttlSeconds;
      r32[w + Rec.PrefetchBelow] = entry.prefetchBelowSeconds;
      r32[w + Rec.RouteHash] = routeHash;
      this.ring64[(p >> 3) + Rec.StoredAt / 2] = entry.storedAtMs;
      r32[w + Rec.TurnStart] = entry.turn?.start ?? 0;
      r32[w + Rec.TurnSize] = entry.turn?.size ?? 0;
      r32[w + Rec.TurnCount] = entry.turn?.count ?? 0;
      r32[w + Rec.TtlCount] = ttlOffsets.length;
      r32[w + Rec.NameCount] = names.length;
      let at = w + HEADER_WORDS;
      for (const offset of ttlOffsets) r32[at++] = offset;
      for (const nameHash of nameHashes) r32[at++] = nameHash;
      this.ring.set(wire, at * 4);
      // Live from here (reserve left it dead): a writer stopped before this point leaves a dead
      // record the ring walks past, never a live one half written.
      Atomics.store(
        r32,
        w + Rec.Flags,
        (entry.denial ? DENIAL : 0) |
          (entry.key.dnssecOk ? DNSSEC_OK : 0) |
          (KINDS.indexOf(entry.routeKind) << KIND_SHIFT),
      );
      Atomics.add(this.meta, Meta.Entries, 1);
      if (entry.denial) Atomics.add(this.meta, Meta.Denials, 1);
      Atomics.add(this.meta, Meta.Insertions, 1);
      Atomics.store(this.hitCounts, slot, 0);
      // Published last: a reader that finds the slot finds the whole record.
      Atomics.store(this.index, slot, pos | 1);
    } finally {
      this.lock.release();
    }
  }

  /**
   * Ring positions by the hash of each name their record holds, for a zone change's drops: kept by
   * whichever thread drops (the zone sync's, worker 0), caught up with what every worker wrote
   * since by walking the ring from where it stopped (records lie one after another), so each record
   * is indexed once. Positions the ring has passed are skipped when read, and the map is built
   * again from the ring once it holds four times the entries. A scan of the index instead cost
   * 4.4 ms a change at 10,000 entries, under the writers' lock.
   */
  private readonly byName = new Map<number, number[]>();
  private byNamePositions = 0;
  private indexedUpTo: number | undefined;

  evictNames(names: Iterable<Fqdn>): number {
    const hashes = new Set<number>();
    for (const name of names) hashes.add(this.stringHash(name));
    if (hashes.size === 0) return 0;
    let dropped = 0;
    this.lock.acquire();
    try {
      Atomics.add(this.meta, Meta.Drops, 1);
      this.catchUpNames();
      for (const hash of hashes) {
        const positions = this.byName.get(hash);
        if (positions === undefined) continue;
        this.byName.delete(hash);
        this.byNamePositions -= positions.length;
        for (const pos of positions) {
          if (!this.live(pos)) continue;
          const w = (pos & this.ringMask) >> 2;
          if (!this.holdsName(w, hash)) continue;
          this.unindex(w, pos);
          if (this.markDead(w)) dropped++;
        }
      }
    } finally {
      this.lock.release();
    }
    return dropped;
  }

  /** Indexes by name every record written since the last call (under the lock). */
  private catchUpNames(): void {
    const head = Atomics.load(this.meta, Meta.Head);
    const tail = Atomics.load(this.meta, Meta.Tail);
    let pos = this.indexedUpTo;
    if (pos === undefined || ((pos - tail) | 0) < 0 || this.byNamePositions > 4 * Math.max(this.maxEntries, 1)) {
      // First use, fallen behind the tail, or too many stale positions: from the oldest record.
      this.byName.clear();
      this.byNamePositions = 0;
      pos = tail;
    }
    while (pos !== head) {
      const w = (pos & this.ringMask) >> 2;
      const size = this.ring32[w + Rec.Size] as number;
      if (size === 0) break;
      if (size > 0) {
        const at = w + HEADER_WORDS + (this.ring32[w + Rec.TtlCount] as number);
        const count = this.ring32[w + Rec.NameCount] as number;
        for (let i = 0; i < count; i++) {
          const hash = this.ring32[at + i] as number;
          const list = this.byName.get(hash);
          if (list === undefined) this.byName.set(hash, [pos]);
          else list.push(pos);
          this.byNamePositions++;
        }
      }
      pos = (pos + Math.abs(size)) | 0;
    }
    this.indexedUpTo = head;
  }

  /** True when the record's names include one of this hash. */
  private holdsName(w: number, hash: number): boolean {
    const at = w + HEADER_WORDS + (this.ring32[w + Rec.TtlCount] as number);
    const count = this.ring32[w + Rec.NameCount] as number;
    for (let i = 0; i < count; i++) if (this.ring32[at + i] === hash) return true;
    return false;
  }

  flushZone(zone: Fqdn): number {
    return this.dropWhere((w) => isInZone(this.questionNameAt(w), zone));
  }

  dropStale(routeIdOf: (name: Fqdn) => string): number {
    return this.dropWhere(
      (w) => this.stringHash(routeIdOf(this.questionNameAt(w))) !== (this.ring32[w + Rec.RouteHash] as number),
    );
  }

  /** Live records that `drop` picks (by the word index of their header) marked dead, under the lock. */
  private dropWhere(drop: (w: number) => boolean): number {
    let dropped = 0;
    this.lock.acquire();
    try {
      Atomics.add(this.meta, Meta.Drops, 1);
      for (let slot = 0; slot < this.index.length; slot++) {
        const v = Atomics.load(this.index, slot);
        if (v === 0) continue;
        const pos = v & ~7;
        if (!this.live(pos)) {
          Atomics.store(this.index, slot, 0);
          continue;
        }
        const w = (pos & this.ringMask) >> 2;
        if (!drop(w)) continue;
        Atomics.store(this.index, slot, 0);
        if (this.markDead(w)) dropped++;
      }
    } finally {
      this.lock.release();
    }
    return dropped;
  }

  /** True while the record at `pos` lies between the ring's tail and head (not yet overwritten). */
  private live(pos: number): boolean {
    const tail = Atomics.load(this.meta, Meta.Tail);
    const head = Atomics.load(this.meta, Meta.Head);
    return ((pos - tail) | 0) >= 0 && ((head - pos) | 0) > 0;
  }

  private find(octets: Uint8Array, nameEnd: number, dnssecOk: boolean, hash: number): RecordView | undefined {
    const { index, ring32 } = this;
    for (let k = 0; k < PROBES; k++) {
      const slot = (hash + k) & this.indexMask;
      const v = Atomics.load(index, slot);
      if (v === 0) continue;
      const pos = v & ~7;
      if (!this.live(pos)) continue;
      const p = pos & this.ringMask;
      const w = p >> 2;
      const flags = ring32[w + Rec.Flags] as number;
      if ((flags & DEAD) !== 0) continue;
      const wireStart = this.questionAt(w, hash, octets, nameEnd, dnssecOk);
      if (wireStart < 0) continue;
      // Read again, and another thread may be overwriting the record between the reads (confirm()
      // tells the reader later). So the counts are bounded here, before they size an array or a
      // view: a torn count once made a lane grow an array to the heap's limit (a fatal OOM).
      const ttlCount = ring32[w + Rec.TtlCount] as number;
      const wireBytes = ring32[w + Rec.WireBytes] as number;
      if (
        ttlCount < 0 ||
        wireBytes < nameEnd + 4 ||
        (w + HEADER_WORDS + ttlCount) * 4 > wireStart ||
        wireStart + wireBytes > this.ring.length
      )
        continue;
      const view = this.view;
      view.wire = this.ringBuffer.subarray(wireStart, wireStart + wireBytes);
      const offsets = view.ttlOffsets;
      offsets.length = ttlCount;
      for (let i = 0; i < ttlCount; i++) offsets[i] = ring32[w + HEADER_WORDS + i] as number;
      view.ttlSeconds = ring32[w + Rec.TtlSeconds] as number;
      view.storedAtMs = this.ring64[(p >> 3) + Rec.StoredAt / 2] as number;
      view.routeKind = KINDS[(flags >> KIND_SHIFT) & 3] as RouteKind;
      view.prefetchBelowSeconds = ring32[w + Rec.PrefetchBelow] as number;
      view.denial = (flags & DENIAL) !== 0;
      const turnCount = ring32[w + Rec.TurnCount] as number;
      view.turn =
        turnCount > 1
          ? { start: ring32[w + Rec.TurnStart] as number, size: ring32[w + Rec.TurnSize] as number, count: turnCount }
          : undefined;
      view.hits = Atomics.load(this.hitCounts, slot);
      view.pos = pos;
      view.slot = slot;
      return view;
    }
    return undefined;
  }

  /**
   * The index slot a new record of this question goes in (under the lock): the same question's
   * (replaced), else an empty or stale one, else the oldest record's of those probed (evicted).
   */
  private slotFor(hash: number, wire: Uint8Array, nameEnd: number, dnssecOk: boolean): number {
    let free = -1;
    let oldest = -1;
    let oldestAge = -1;
    const head = Atomics.load(this.meta, Meta.Head);
    for (let k = 0; k < PROBES; k++) {
      const slot = (hash + k) & this.indexMask;
      const v = Atomics.load(this.index, slot);
      const pos = v & ~7;
      if (v === 0 || !this.live(pos)) {
        if (free < 0) free = slot;
        continue;
      }
      const w = (pos & this.ringMask) >> 2;
      if (this.questionAt(w, hash, wire, nameEnd, dnssecOk) >= 0) {
        this.markDead(w);
        return slot;
      }
      if (((this.ring32[w + Rec.Flags] as number) & DEAD) !== 0) {
        if (free < 0) free = slot;
        continue;
      }
      const age = (head - pos) >>> 0;
      if (age > oldestAge) {
        oldestAge = age;
        oldest = slot;
      }
    }
    if (free >= 0) return free;
    // Every slot probed holds another live question: the oldest makes room, counted as evicted.
    const w = (Atomics.load(this.index, oldest) & ~7 & this.ringMask) >> 2;
    this.evict(w);
    return oldest;
  }

  /**
   * Where the reply of the record at `w` starts in the ring when it answers this question
   * (`octets` holds it at HEADER_BYTES..nameEnd + 4: hash, DO bit, the name in any case, type and
   * class), else -1. A reader's view may be torn, so what its header says is checked to stay inside
   * the ring before the octets are read.
   */
  private questionAt(w: number, hash: number, octets: Uint8Array, nameEnd: number, dnssecOk: boolean): number {
    const { ring, ring32 } = this;
    if (ring32[w + Rec.Hash] !== hash || ring32[w + Rec.NameEnd] !== nameEnd) return -1;
    if ((((ring32[w + Rec.Flags] as number) & DNSSEC_OK) !== 0) !== dnssecOk) return -1;
    const start = this.wireStartAt(w);
    const wireBytes = ring32[w + Rec.WireBytes] as number;
    if (wireBytes < nameEnd + 4 || start + wireBytes > ring.length || (ring32[w + Rec.TtlCount] as number) > wireBytes)
      return -1;
    const t = start + nameEnd;
    const same =
      sameNameOctetsAt(ring, start + HEADER_BYTES, octets, HEADER_BYTES, nameEnd - HEADER_BYTES) &&
      ring[t] === octets[nameEnd] &&
      ring[t + 1] === octets[nameEnd + 1] &&
      ring[t + 2] === octets[nameEnd + 2] &&
      ring[t + 3] === octets[nameEnd + 3];
    return same ? start : -1;
  }

  private wireStartAt(w: number): number {
    return (
      (w + HEADER_WORDS + (this.ring32[w + Rec.TtlCount] as number) + (this.ring32[w + Rec.NameCount] as number)) * 4
    );
  }

  private questionNameAt(w: number): Fqdn {
    const start = this.wireStartAt(w);
    const wire = this.ringBuffer.subarray(start, start + (this.ring32[w + Rec.WireBytes] as number));
    return toFqdn(readName(wire, HEADER_BYTES).name);
  }

  /**
   * Room for `size` bytes at the head (under the lock): the oldest records dropped until it fits
   * and an entry is free, the tail moved past each before its bytes are written over. Returns the
   * record's position.
   */
  private reserve(size: number): number {
    const ringBytes = this.ring.length;
    let head = Atomics.load(this.meta, Meta.Head);
    const toEnd = ringBytes - (head & this.ringMask);
    // A record never wraps: a filler takes the rest of the ring when it would.
    const need = toEnd < size ? toEnd + size : size;
    while (
      ((head - Atomics.load(this.meta, Meta.Tail)) >>> 0) + need > ringBytes ||
      Atomics.load(this.meta, Meta.Entries) >= this.maxEntries
    ) {
      if (!this.dropTail()) break;
    }
    if (toEnd < size) {
      this.ring32[(head & this.ringMask) >> 2] = -toEnd;
      head = (head + toEnd) | 0;
      Atomics.store(this.meta, Meta.Head, head);
    }
    // Its size and a dead mark before the head moves past it: whatever happens to the writer
    // after (a worker terminated mid-write), the ring can be walked and nothing reads it as live.
    const w = (head & this.ringMask) >> 2;
    this.ring32[w + Rec.Size] = size;
    this.ring32[w + Rec.Flags] = DEAD;
    Atomics.store(this.meta, Meta.Head, (head + size) | 0);
    return head;
  }

  /** Moves the tail past its record (dropping it, counted as evicted when still live); false when empty. */
  private dropTail(): boolean {
    const tail = Atomics.load(this.meta, Meta.Tail);
    if (tail === Atomics.load(this.meta, Meta.Head)) return false;
    const w = (tail & this.ringMask) >> 2;
    const size = this.ring32[w + Rec.Size] as number;
    if (size === 0) {
      // Never written: the ring's words were overwritten outside the lock. Start it again empty.
      Atomics.store(this.meta, Meta.Tail, Atomics.load(this.meta, Meta.Head));
      return false;
    }
    if (size > 0) {
      this.evict(w);
      this.unindex(w, tail);
    }
    Atomics.store(this.meta, Meta.Tail, (tail + Math.abs(size)) | 0);
    return true;
  }

  /** Marks a record dead, counted as an eviction when its TTL had time left (as dnsmasq counts). */
  private evict(w: number): void {
    const stored = {
      ttlSeconds: this.ring32[w + Rec.TtlSeconds] as number,
      storedAtMs: this.ring64[(w >> 1) + Rec.StoredAt / 2] as number,
    };
    const denial = ((this.ring32[w + Rec.Flags] as number) & DENIAL) !== 0;
    if (this.markDead(w) && remainingSecondsOf(stored, this.now()) > 0) {
      Atomics.add(this.meta, Meta.Evictions, 1);
      if (denial) Atomics.add(this.meta, Meta.DenialEvictions, 1);
    }
  }

  /** True when it was live: the entry counts go down once. */
  private markDead(w: number): boolean {
    const flags = Atomics.or(this.ring32, w + Rec.Flags, DEAD);
    if ((flags & DEAD) !== 0) return false;
    Atomics.sub(this.meta, Meta.Entries, 1);
    if ((flags & DENIAL) !== 0) Atomics.sub(this.meta, Meta.Denials, 1);
    return true;
  }

  /** Clears the index slot that points at the record at `pos`, if one still does. */
  private unindex(w: number, pos: number): void {
    const hash = this.ring32[w + Rec.Hash] as number;
    for (let k = 0; k < PROBES; k++) {
      const slot = (hash + k) & this.indexMask;
      if (Atomics.load(this.index, slot) === (pos | 1)) {
        Atomics.store(this.index, slot, 0);
        return;
      }
    }
  }

  /** A name's or route's hash, the same in every thread (the store's basis). */
  private stringHash(text: string): number {
    let hash = this.basis;
    for (let i = 0; i < text.length; i++) hash = Math.imul(hash ^ text.charCodeAt(i), 0x01000193);
    return hash;
  }
}
