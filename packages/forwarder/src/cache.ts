import { type Fqdn, isInZone, QTYPE, RCODE, readName, type ScannedResponse, toFqdn } from '@cluster-dns/wire';
import { LRUCache } from 'lru-cache';

/** One cached reply: wire bytes (ID 0, no OPT, every TTL set to the entry's TTL) and where its TTLs are. */
export interface CachedReply {
  readonly wire: Buffer;
  readonly ttlOffsets: readonly number[];
  readonly ttlSeconds: number;
  readonly storedAtMs: number;
  /** The route this came through: a config change that moves the route drops it. */
  readonly routeId: string;
  /** Every owner name in the reply (question, answers, additionals): what a zone change drops it by. */
  readonly names: readonly Fqdn[];
  /** Hits since it was stored, for prefetch. */
  hits: number;
  /** NXDOMAIN or NODATA (CoreDNS's cache "denial" type), else "success". */
  readonly denial: boolean;
}

/** A hit: fresh (remaining TTL above 0), or stale (expired, kept for serve-stale). */
export interface CacheHit {
  entry: CachedReply;
  remainingSeconds: number;
  stale: boolean;
}

export interface CacheCounters {
  hits: number;
  misses: number;
  insertions: number;
  evictions: number;
  /** Of those hits and evictions, the denials (NXDOMAIN, NODATA): CoreDNS's split by type. */
  denialHits?: number;
  denialEvictions?: number;
}

export interface CachePolicy {
  negativeCache: boolean;
  negTtlSeconds: number;
  minCacheTtlSeconds: number;
  maxCacheTtlSeconds: number;
}

/** The longest any answer is kept (RFC 8767 §4), and any negative answer (RFC 2308 §5's three hours). */
export const MAX_TTL_SECONDS = 604_800;
export const MAX_NEGATIVE_TTL_SECONDS = 10_800;

/**
 * How long a reply may be cached, or undefined when it must not be: RFC 2308 for negative
 * answers (TTL from the SOA, capped by --neg-ttl), never SERVFAIL/REFUSED/truncated replies.
 */
export function cacheTtlOf(reply: Buffer, scanned: ScannedResponse, policy: CachePolicy): number | undefined {
  if (scanned.truncated) return undefined;
  const answers = scanned.records.filter((r) => r.section === 'answer');
  const negative = scanned.rcode === RCODE.NXDOMAIN || (scanned.rcode === RCODE.NOERROR && answers.length === 0);
  let ttl: number | undefined;
  if (scanned.rcode !== RCODE.NOERROR && scanned.rcode !== RCODE.NXDOMAIN) return undefined;
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
    ttl = Math.min(...scanned.records.filter((r) => r.section !== 'additional').map((r) => r.ttl));
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
  reply: Buffer,
  scanned: ScannedResponse,
  ttlSeconds: number,
  routeId: string,
  nowMs: number,
): CachedReply {
  const wire = Buffer.from(reply);
  const ttlOffsets = scanned.records.map((r) => r.ttlOffset);
  for (const offset of ttlOffsets) wire.writeUInt32BE(ttlSeconds, offset);
  const names = new Set<Fqdn>();
  if (scanned.questionEnd > 12) names.add(toFqdn(readName(reply, 12).name));
  for (const r of scanned.records) if (r.section !== 'authority') names.add(toFqdn(readName(reply, r.start).name));
  const denial = scanned.rcode === RCODE.NXDOMAIN || !scanned.records.some((r) => r.section === 'answer');
  return { wire, ttlOffsets, ttlSeconds, storedAtMs: nowMs, routeId, names: [...names], hits: 0, denial };
}

/**
 * The LRU cache of replies (lru-cache), bounded by entries. A hit returns a copy whose TTLs are
 * what remains, never the original. An expired entry is kept `maxStaleSeconds` more (RFC 8767
 * serve-stale; 0 drops it on read), and every entry is indexed by the names in it, so a zone
 * change drops exactly the entries that hold a changed name.
 */
export class ReplyCache {
  private readonly lru: LRUCache<string, CachedReply> | undefined;
  private readonly byName = new Map<Fqdn, Set<string>>();
  private denials = 0;

  constructor(
    readonly maxEntries: number,
    private readonly counters: CacheCounters,
    private readonly now: () => number = Date.now,
    private readonly maxStaleSeconds = 0,
  ) {
    this.lru =
      maxEntries > 0
        ? new LRUCache<string, CachedReply>({
            max: maxEntries,
            dispose: (entry, key, reason) => {
              // dnsmasq counts as evictions only live entries pushed out to make room.
              if (reason === 'evict' && this.remainingSeconds(entry) > 0) {
                this.counters.evictions++;
                if (entry.denial) this.counters.denialEvictions = (this.counters.denialEvictions ?? 0) + 1;
              }
              if (entry.denial) this.denials--;
              this.untag(key, entry);
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

  private remainingSeconds(entry: CachedReply): number {
    return entry.ttlSeconds - Math.floor((this.now() - entry.storedAtMs) / 1000);
  }

  /**
   * The entry and its remaining TTL, or undefined when absent or expired. The caller copies the
   * bytes once, patching the remaining TTL in (finishFromTemplate). Counts nothing: the caller
   * counts hits.
   */
  get(key: string): CacheHit | undefined {
    const entry = this.lru?.get(key);
    if (!entry) return undefined;
    const remainingSeconds = this.remainingSeconds(entry);
    if (remainingSeconds <= 0) {
      if (-remainingSeconds < this.maxStaleSeconds) return { entry, remainingSeconds: 0, stale: true };
      this.lru?.delete(key);
      return undefined;
    }
    return { entry, remainingSeconds, stale: false };
  }

  set(key: string, entry: CachedReply): void {
    if (!this.lru) return;
    this.lru.set(key, entry);
    if (!this.lru.has(key)) return;
    if (entry.denial) this.denials++;
    for (const name of entry.names) {
      let keys = this.byName.get(name);
      if (!keys) {
        keys = new Set();
        this.byName.set(name, keys);
      }
      keys.add(key);
    }
    this.counters.insertions++;
  }

  /** Drops every entry that holds one of these names (as question, answer or additional owner). */
  evictNames(names: Iterable<Fqdn>): number {
    if (!this.lru) return 0;
    let dropped = 0;
    for (const name of names) {
      const keys = this.byName.get(name);
      if (!keys) continue;
      for (const key of [...keys]) if (this.lru.delete(key)) dropped++;
    }
    return dropped;
  }

  /** Drops every entry whose question lies in `zone`. */
  flushZone(zone: Fqdn): number {
    if (!this.lru) return 0;
    let dropped = 0;
    for (const key of [...this.lru.keys()]) {
      if (isInZone(key.slice(0, key.indexOf('|')) as Fqdn, zone) && this.lru.delete(key)) dropped++;
    }
    return dropped;
  }

  private untag(key: string, entry: CachedReply): void {
    for (const name of entry.names) {
      const keys = this.byName.get(name);
      keys?.delete(key);
      if (keys?.size === 0) this.byName.delete(name);
    }
  }

  /** Drops entries whose route is no longer the one that `routeIdOf(key)` gives. */
  dropStale(routeIdOf: (key: string) => string): number {
    if (!this.lru) return 0;
    let dropped = 0;
    for (const [key, entry] of this.lru.entries()) {
      if (routeIdOf(key) !== entry.routeId) {
        this.lru.delete(key);
        dropped++;
      }
    }
    return dropped;
  }
}
