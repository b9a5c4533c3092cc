import { QTYPE, RCODE, type ScannedResponse } from '@cluster-dns/wire';
import { LRUCache } from 'lru-cache';

/** One cached reply: wire bytes (ID 0, no OPT, every TTL set to the entry's TTL) and where its TTLs are. */
export interface CachedReply {
  readonly wire: Buffer;
  readonly ttlOffsets: readonly number[];
  readonly ttlSeconds: number;
  readonly storedAtMs: number;
  /** The route this came through: a config change that moves the route drops it. */
  readonly routeId: string;
}

export interface CacheCounters {
  hits: number;
  misses: number;
  insertions: number;
  evictions: number;
}

export interface CachePolicy {
  negativeCache: boolean;
  negTtlSeconds: number;
  minCacheTtlSeconds: number;
  maxCacheTtlSeconds: number;
}

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
  return { wire, ttlOffsets, ttlSeconds, storedAtMs: nowMs, routeId };
}

/**
 * The LRU cache of replies (lru-cache), bounded by entries. A hit returns a copy whose TTLs are
 * what remains, never the original; an expired entry is dropped on read.
 */
export class ReplyCache {
  private readonly lru: LRUCache<string, CachedReply> | undefined;

  constructor(
    readonly maxEntries: number,
    private readonly counters: CacheCounters,
    private readonly now: () => number = Date.now,
  ) {
    this.lru =
      maxEntries > 0
        ? new LRUCache<string, CachedReply>({
            max: maxEntries,
            dispose: (entry, _key, reason) => {
              // dnsmasq counts as evictions only live entries pushed out to make room.
              if (reason === 'evict' && this.remainingSeconds(entry) > 0) this.counters.evictions++;
            },
          })
        : undefined;
  }

  get size(): number {
    return this.lru?.size ?? 0;
  }

  private remainingSeconds(entry: CachedReply): number {
    return entry.ttlSeconds - Math.floor((this.now() - entry.storedAtMs) / 1000);
  }

  /**
   * The entry and its remaining TTL, or undefined when absent or expired. The caller copies the
   * bytes once, patching the remaining TTL in (finishFromTemplate). Counts nothing: the caller
   * counts hits.
   */
  get(key: string): { entry: CachedReply; remainingSeconds: number } | undefined {
    const entry = this.lru?.get(key);
    if (!entry) return undefined;
    const remainingSeconds = this.remainingSeconds(entry);
    if (remainingSeconds <= 0) {
      this.lru?.delete(key);
      return undefined;
    }
    return { entry, remainingSeconds };
  }

  set(key: string, entry: CachedReply): void {
    if (!this.lru) return;
    this.lru.set(key, entry);
    this.counters.insertions++;
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
