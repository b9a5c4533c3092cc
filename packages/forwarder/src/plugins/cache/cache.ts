import { Buffer } from 'node:buffer';
import { performance } from 'node:perf_hooks';
import {
  type Fqdn,
  findTurnRun,
  HEADER_BYTES,
  isInZone,
  nameHashOf,
  type ParsedQuery,
  type PlainQuestion,
  QTYPE,
  questionOctetsOf,
  RCODE,
  readName,
  type ScannedResponse,
  sameNameOctets,
  type TurnRun,
  toFqdn,
} from '@cluster-dns/wire';
import { LRUCache } from 'lru-cache';
import type { CachePolicy } from '../../config/cache-policy.js';
import type { RouteKind } from '../../config/route-table.js';

/** What a cached reply answers: the question, and whether DNSSEC records were asked for. */
export interface CacheKey {
  readonly name: Fqdn;
  readonly qtype: number;
  readonly qclass: number;
  readonly dnssecOk: boolean;
  /** The string the LRU is keyed on, made by cacheIdOf only and never read back. */
  readonly id: string;
}

/** The LRU's key for a query: its name, type, class and DO bit. */
export function cacheIdOf(q: ParsedQuery): string {
  return `${q.key}|${q.qtype}|${q.qclass}|${q.edns?.dnssecOk ? 1 : 0}`;
}

export function cacheKeyOf(q: ParsedQuery): CacheKey {
  return { name: q.key, qtype: q.qtype, qclass: q.qclass, dnssecOk: q.edns?.dnssecOk ?? false, id: cacheIdOf(q) };
}

/**
 * What a hit reads of an entry, whichever cache holds it (ReplyCache's own entries, or a view of
 * the shared store's bytes): the reply's wire bytes (ID 0, no OPT, every TTL set to the entry's
 * TTL) and where its TTLs are, and what serving it depends on.
 */
export interface CachedAnswer {
  readonly wire: Buffer;
  readonly ttlOffsets: readonly number[];
  readonly ttlSeconds: number;
  readonly storedAtMs: number;
  /** Its route's kind, for the serve-stale policy (answers of `--server` routes may be kept from it). */
  readonly routeKind: RouteKind;
  /** Hits since it was stored, for prefetch. */
  readonly hits: number;
  /** Prefetch once this many seconds or fewer are left (prefetchThreshold). */
  readonly prefetchBelowSeconds: number;
  /** NXDOMAIN or NODATA (CoreDNS's cache "denial" type), else "success". */
  readonly denial: boolean;
  /** The A or AAAA records served in a turning order (its route's `loadbalance`), if any. */
  readonly turn: TurnRun | undefined;
}

/** One cached reply as it is made from an upstream's answer, and as ReplyCache keeps it. */
export interface CachedReply extends CachedAnswer {
  readonly key: CacheKey;
  /** Hash of the question name's canonical octets (wire's nameHashOf), what a hit looks it up by. */
  readonly nameHash: number;
  /** Offset just past the question's name in `wire` (its octets start after the header). */
  readonly nameEnd: number;
  /** The question's octets (name in canonical case, type, class) as a latin1 string: the express lane's key. */
  readonly questionOctets: string;
  /** The route this came through: a config change that moves the route drops it. */
  readonly routeId: string;
  /** Every owner name in the reply (question, answers, additionals): what a zone change drops it by. */
  readonly names: readonly Fqdn[];
  hits: number;
  /** The cache's insertion count when this entry last moved to the LRU's newest end (ReplyCache's). */
  lruMark: number;
}

/** A hit: fresh (remaining TTL above 0), or stale (expired, kept for serve-stale). */
export interface CacheHit {
  entry: CachedAnswer;
  remainingSeconds: number;
  stale: boolean;
}

/**
 * A cache of replies as the cache stage uses it: ReplyCache (one thread's, bounded by entries) or
 * the shared store (shared-cache/, every worker's, bounded by bytes too).
 */
export interface AnswerCache {
  readonly maxEntries: number;
  readonly size: number;
  /** Entries holding a denial (NXDOMAIN or NODATA); the rest are successes. */
  readonly denialEntries: number;
  readonly counts: Readonly<CacheCounts>;
  /** Whole seconds of TTL left to an entry: 0 or less once expired. */
  remainingSeconds(entry: CachedAnswer): number;
  /** The entry answering this query and its remaining TTL, or undefined when absent or past serving. */
  lookup(q: ParsedQuery): CacheHit | undefined;
  /**
   * The entry for a plain query (readPlainQuery), fresh or not, or undefined. What it returns may
   * be a view that is only good until the next call, and whose bytes must be confirmed whole
   * (confirm) once read. `askedCase` says whether a reply made from it must copy the asker's
   * spelling of the name (found in any case) or already has it.
   */
  findPlain(raw: Buffer, q: PlainQuestion): CachedAnswer | undefined;
  readonly askedCase: boolean;
  /** True when what was read of the entry findPlain gave is whole (no writer took its place meanwhile). */
  confirm(entry: CachedAnswer): boolean;
  /** A hit on the entry findPlain or lookup gave, for prefetch. */
  countHit(entry: CachedAnswer): void;
  /**
   * Taken before an answer is asked for: set() with it keeps the answer only if no entry was
   * dropped since (a zone change while it was out may have been answered from the old state).
   */
  writeToken(): number;
  set(entry: CachedReply, token?: number): void;
  /** Drops every entry that holds one of these names (as question, answer or additional owner). */
  evictNames(names: Iterable<Fqdn>): number;
  /** Drops every entry whose question lies in `zone`. */
  flushZone(zone: Fqdn): number;
  /** Drops entries whose route is no longer the one `routeIdOf` gives for their question. */
  dropStale(routeIdOf: (name: Fqdn) => string): number;
}

/** What the cache itself counts (the cache stage counts hits and misses). */
export interface CacheCounts {
  insertions: number;
  evictions: number;
  /** Of those evictions, the denials (NXDOMAIN, NODATA): CoreDNS's split by type. */
  denialEvictions: number;
}

export type { CachePolicy };

/** Entries kept on one question hash (see ReplyCache.set). */
export const MAX_SAME_HASH = 8;

/** The longest any answer is kept (RFC 8767 §4), and any negative answer (RFC 2308 §5's three hours). */
export const MAX_TTL_SECONDS = 604_800;
export const MAX_NEGATIVE_TTL_SECONDS = 10_800;

/**
 * How long a reply may be cached, or undefined when it must not be: RFC 2308 for negative
 * answers (TTL from the SOA, capped by --neg-ttl), never SERVFAIL/REFUSED/truncated replies.
 */
export function cacheTtlOf(reply: Buffer, scanned: ScannedResponse, policy: CachePolicy): number | undefined {
  if (scanned.truncated) return undefined;
  if (scanned.rcode !== RCODE.NOERROR && scanned.rcode !== RCODE.NXDOMAIN) return undefined;
  const negative = scanned.rcode === RCODE.NXDOMAIN || !scanned.records.some((r) => r.section === 'answer');
  let ttl: number;
  if (negative ? policy.disable?.denial : policy.disable?.success) return undefined;
  if (negative) {
    if (!policy.negativeCache) return undefined;
    const soa = scanned.records.find((r) => r.section === 'authority' && r.type === QTYPE.SOA);
    if (soa) {
      const minimum = reply.readUInt32BE(soa.end - 4);
      ttl = Math.min(soa.ttl, minimum);
      if (policy.negTtlSeconds > 0) ttl = Math.min(ttl, policy.negTtlSeconds);
    } else if (policy.negTtlSeconds > 0) {
      ttl = policy.negTtlSeconds;
    } else return undefined;
  } else {
    ttl = Number.POSITIVE_INFINITY;
    for (const r of scanned.records) if (r.section !== 'additional' && r.ttl < ttl) ttl = r.ttl;
  }
  // RFC 2308 §5 (negative answers: hours, not days) and RFC 8767 §4 (at most 7 days): an
  // upstream that says "forever" is not believed.
  ttl = Math.min(ttl, negative ? MAX_NEGATIVE_TTL_SECONDS : MAX_TTL_SECONDS);
  ttl = Math.max(ttl, policy.minCacheTtlSeconds);
  if (policy.maxCacheTtlSeconds > 0) ttl = Math.min(ttl, policy.maxCacheTtlSeconds);
  return ttl > 0 ? ttl : undefined;
}

/** Makes the cache entry: every TTL in the reply set to `ttlSeconds`, so hits count down together. */
export function toCachedReply(
  key: CacheKey,
  reply: Buffer,
  scanned: ScannedResponse,
  ttlSeconds: number,
  route: { id: string; kind: RouteKind; loadbalance?: boolean },
  nowMs: number,
  /** More names to index it by (a rewritten question's). */
  fromNames: readonly Fqdn[] = [],
): CachedReply {
  const wire = Buffer.from(reply);
  const ttlOffsets = scanned.records.map((r) => r.ttlOffset);
  for (const offset of ttlOffsets) wire.writeUInt32BE(ttlSeconds, offset);
  const names = new Set<Fqdn>([key.name, ...fromNames]);
  for (const r of scanned.records) if (r.section !== 'authority') names.add(toFqdn(readName(reply, r.start).name));
  const denial = scanned.rcode === RCODE.NXDOMAIN || !scanned.records.some((r) => r.section === 'answer');
  const nameEnd = scanned.questionEnd - 4;
  return {
    key,
    nameHash: nameHashOf(wire, HEADER_BYTES, nameEnd),
    nameEnd,
    questionOctets: questionOctetsOf(wire, nameEnd + 4),
    wire,
    ttlOffsets,
    ttlSeconds,
    storedAtMs: nowMs,
    routeId: route.id,
    routeKind: route.kind,
    names: [...names],
    hits: 0,
    prefetchBelowSeconds: prefetchThreshold(ttlSeconds),
    lruMark: 0,
    denial,
    turn: route.loadbalance ? findTurnRun(scanned) : undefined,
  };
}

/**
 * When an entry asked often is fetched again: once between a tenth and a fifth of its TTL is left
 * (at least 1 s), drawn per entry. Unbound and CoreDNS use a fixed tenth; then names cached
 * together (a burst of lookups, a restart's warm-up) all come due together, and their refreshes
 * arrive as one burst of misses (measured: ~1,000 names at once, a p99 of 20–60 ms at 10k QPS).
 * Drawn, they spread over a tenth of the TTL.
 */
export function prefetchThreshold(ttlSeconds: number, random: () => number = Math.random): number {
  return Math.max(1, Math.floor(ttlSeconds * (0.1 + 0.1 * random())));
}

/**
 * The cache's clock, in ms: monotonic, as Go's time that CoreDNS counts TTLs with. Every use is an
 * interval (a TTL counted down, a recheck or case-blind period); on the wall clock an NTP step back
 * would serve TTLs above what the upstream gave, and a step forward expire the whole cache at once.
 * The system's monotonic clock, not the thread's: each worker thread's performance.now() counts
 * from its own start, and workers share a cache whose entries carry the time they were stored.
 */
export const monotonicMs = (): number => performance.now() + MONOTONIC_OFFSET_MS;
const MONOTONIC_OFFSET_MS = Number(process.hrtime.bigint()) / 1e6 - performance.now();

/** Whole seconds of TTL left to an entry at `nowMs`: 0 or less once expired. */
export function remainingSecondsOf(entry: Pick<CachedAnswer, 'ttlSeconds' | 'storedAtMs'>, nowMs: number): number {
  return entry.ttlSeconds - Math.floor((nowMs - entry.storedAtMs) / 1000);
}

/**
 * The LRU cache of replies (lru-cache), bounded by entries. The caller copies a hit's bytes once,
 * patching the remaining TTL in (finishFromTemplate). An expired entry is kept `maxStaleSeconds`
 * more (RFC 8767 serve-stale; 0 drops it on read), and every entry is indexed by the names in it,
 * so a zone change drops exactly the entries that hold a changed name.
 */
export class ReplyCache implements AnswerCache {
  private readonly lru: LRUCache<string, CachedReply> | undefined;
  /**
   * Entries by every name they hold, for a zone change's drops: the entry itself while a name is
   * in one (nearly all), a Set once in more. A Set per name was ~150 B of heap an entry.
   */
  private readonly byName = new Map<Fqdn, CachedReply | Set<CachedReply>>();
  /**
   * Entries by the hash of their question name: a hit is looked up by the hash the query's parse
   * made and its octets compared, so no string is made per query (the LRU's own key is made
   * once, when the entry is).
   */
  private readonly byQuestion = new Map<number, CachedReply[]>();
  /**
   * Entries by their question's octets in canonical case (questionOctets): a query asked in that
   * case (nearly every one) is found by a string V8 hashes and compares natively, where the hash
   * above walks its octets in JS. One or two entries each (DO clear and set).
   */
  private readonly byQuestionOctets = new Map<string, CachedReply[]>();
  private denials = 0;
  /**
   * A hit moves its entry to the LRU's newest end only when this many insertions came since it was
   * last moved there, as memcached bumps an item at most once a minute. Moving it costs more than
   * the rest of a hit's lookup, and until then the entry is among the newest eighth anyway: a used
   * entry outlives at least 7/8 of the insertions that exact LRU would give it, and with few
   * insertions (a warm cache) hits touch the LRU not at all.
   */
  private readonly bumpAfter: number;
  readonly counts: CacheCounts = { insertions: 0, evictions: 0, denialEvictions: 0 };

  constructor(
    readonly maxEntries: number,
    private readonly now: () => number = monotonicMs,
    private readonly maxStaleSeconds = 0,
  ) {
    this.bumpAfter = Math.max(1, Math.floor(maxEntries / 8));
    this.lru =
      maxEntries > 0
        ? new LRUCache<string, CachedReply>({
            max: maxEntries,
            dispose: (entry, _id, reason) => {
              // dnsmasq counts as evictions only live entries pushed out to make room.
              if (reason === 'evict' && this.remainingSeconds(entry) > 0) {
                this.counts.evictions++;
                if (entry.denial) this.counts.denialEvictions++;
              }
              if (entry.denial) this.denials--;
              this.untag(entry);
            },
          })
        : undefined;
  }

  get size(): number {
    return this.lru?.size ?? 0;
  }

  /** Entries holding a denial (NXDOMAIN or NODATA); the rest are successes. */
  get denialEntries(): number {
    return this.denials;
  }

  remainingSeconds(entry: CachedAnswer): number {
    return remainingSecondsOf(entry, this.now());
  }

  /** Found by the question's octets as asked: a reply made from it has the asker's spelling already. */
  readonly askedCase = false;

  findPlain(raw: Buffer, q: PlainQuestion): CachedReply | undefined {
    return this.findByOctets(questionOctetsOf(raw, q.questionEnd), q.dnssecOk);
  }

  /** Entries are this thread's own objects: what was read of one is always whole. */
  confirm(_entry: CachedAnswer): boolean {
    return true;
  }

  countHit(entry: CachedAnswer): void {
    (entry as CachedReply).hits++;
  }

  /** Entries dropped so far (evictNames, flushZone, dropStale): see AnswerCache.writeToken. */
  private drops = 0;

  writeToken(): number {
    return this.drops;
  }

  /** The entry answering this query and its remaining TTL, or undefined when absent or past serving. */
  lookup(q: ParsedQuery): CacheHit | undefined {
    const entry = this.find(q);
    if (entry === undefined) return undefined;
    const remainingSeconds = this.remainingSeconds(entry);
    if (remainingSeconds > 0) return { entry, remainingSeconds, stale: false };
    if (-remainingSeconds < this.maxStaleSeconds) return { entry, remainingSeconds: 0, stale: true };
    this.lru?.delete(entry.key.id);
    return undefined;
  }

  /**
   * The entry for a query, fresh or not, found by its name's hash (nameHashOf) and the name's
   * octets (any case); counted as used by the LRU.
   */
  private find(q: ParsedQuery): CachedReply | undefined {
    const candidates = this.byQuestion.get(q.nameHash);
    if (candidates === undefined) return undefined;
    const dnssecOk = q.edns?.dnssecOk === true;
    const nameEnd = q.questionEnd - 4;
    for (let i = 0; i < candidates.length; i++) {
      const entry = candidates[i] as CachedReply;
      const { key } = entry;
      if (key.qtype !== q.qtype || key.qclass !== q.qclass || key.dnssecOk !== dnssecOk) continue;
      if (entry.nameEnd !== nameEnd || !sameNameOctets(entry.wire, q.raw, HEADER_BYTES, nameEnd)) continue;
      this.touch(entry);
      return entry;
    }
    return undefined;
  }

  /**
   * The entry for a question given as its octets exactly as an entry holds them (questionOctets:
   * the name in canonical case), fresh or not; a query in any other case is found only by lookup().
   */
  findByOctets(questionOctets: string, dnssecOk: boolean): CachedReply | undefined {
    const candidates = this.byQuestionOctets.get(questionOctets);
    if (candidates === undefined) return undefined;
    for (let i = 0; i < candidates.length; i++) {
      const entry = candidates[i] as CachedReply;
      if (entry.key.dnssecOk !== dnssecOk) continue;
      this.touch(entry);
      return entry;
    }
    return undefined;
  }

  /** A hit: the entry counts as used. */
  private touch(entry: CachedReply): void {
    if (this.counts.insertions - entry.lruMark >= this.bumpAfter) {
      // Through the LRU, so the entry counts as used.
      this.lru?.get(entry.key.id);
      entry.lruMark = this.counts.insertions;
    }
  }

  set(entry: CachedReply, token?: number): void {
    if (!this.lru || (token !== undefined && token !== this.drops)) return;
    this.lru.set(entry.key.id, entry);
    if (this.lru.peek(entry.key.id) !== entry) return;
    if (entry.denial) this.denials++;
    const sameHash = this.byQuestion.get(entry.nameHash);
    if (sameHash) {
      // A hit compares the octets of every entry on its hash: however the names were picked, that
      // stays a few compares, as the oldest on a full hash makes room.
      if (sameHash.length >= MAX_SAME_HASH) {
        const oldest = sameHash[0] as CachedReply;
        // Pushed out to make room, as the LRU's own evictions are, and counted with them.
        if (this.remainingSeconds(oldest) > 0) {
          this.counts.evictions++;
          if (oldest.denial) this.counts.denialEvictions++;
        }
        this.lru.delete(oldest.key.id);
      }
      sameHash.push(entry);
    } else this.byQuestion.set(entry.nameHash, [entry]);
    const sameQuestion = this.byQuestionOctets.get(entry.questionOctets);
    if (sameQuestion) sameQuestion.push(entry);
    else this.byQuestionOctets.set(entry.questionOctets, [entry]);
    for (const name of entry.names) {
      const held = this.byName.get(name);
      if (held === undefined) this.byName.set(name, entry);
      else if (held instanceof Set) held.add(entry);
      else if (held !== entry) this.byName.set(name, new Set([held, entry]));
    }
    this.counts.insertions++;
    entry.lruMark = this.counts.insertions;
  }

  /** Drops every entry that holds one of these names (as question, answer or additional owner). */
  evictNames(names: Iterable<Fqdn>): number {
    this.drops++;
    let dropped = 0;
    for (const name of names) {
      const held = this.byName.get(name);
      const entries = held === undefined ? [] : held instanceof Set ? [...held] : [held];
      for (const entry of entries) if (this.lru?.delete(entry.key.id)) dropped++;
    }
    return dropped;
  }

  /** Drops every entry whose question lies in `zone`. */
  flushZone(zone: Fqdn): number {
    return this.dropWhere((entry) => isInZone(entry.key.name, zone));
  }

  /** Drops entries whose route is no longer the one `routeIdOf` gives for their question. */
  dropStale(routeIdOf: (name: Fqdn) => string): number {
    return this.dropWhere((entry) => routeIdOf(entry.key.name) !== entry.routeId);
  }

  private dropWhere(drop: (entry: CachedReply) => boolean): number {
    this.drops++;
    if (!this.lru) return 0;
    let dropped = 0;
    for (const entry of [...this.lru.values()]) if (drop(entry) && this.lru.delete(entry.key.id)) dropped++;
    return dropped;
  }

  private untag(entry: CachedReply): void {
    unlist(this.byQuestion, entry.nameHash, entry);
    unlist(this.byQuestionOctets, entry.questionOctets, entry);
    for (const name of entry.names) {
      const held = this.byName.get(name);
      if (held === entry) this.byName.delete(name);
      else if (held instanceof Set) {
        held.delete(entry);
        if (held.size === 1) this.byName.set(name, held.values().next().value as CachedReply);
        else if (held.size === 0) this.byName.delete(name);
      }
    }
  }
}

/** Takes `entry` off the list under `key`, and the list off the map once it is empty. */
function unlist<K>(index: Map<K, CachedReply[]>, key: K, entry: CachedReply): void {
  const list = index.get(key);
  if (!list) return;
  const at = list.indexOf(entry);
  if (at >= 0) list.splice(at, 1);
  if (list.length === 0) index.delete(key);
}
