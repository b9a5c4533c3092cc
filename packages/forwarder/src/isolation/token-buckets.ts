/**
 * One key's bucket: tokens left at `lastMs`; how many takes it has refused in all; and since when
 * it has been over its rate, refused at least once a second.
 */
interface Bucket {
  tokens: number;
  lastMs: number;
  refused: number;
  overSinceMs: number;
  lastRefusedMs: number;
}

/** A key not refused for this long is back under its rate. */
const QUIET_MS = 1000;

/**
 * Token buckets by key (a client's address; an address and a question): `ratePerSecond` tokens
 * a second, at most `burst` saved up. At most `maxKeys` are kept, so a flood from many spoofed
 * sources costs bounded memory: when full, the eighth of them seen first is forgotten (they start
 * again full, which errs towards serving). Takes no clock of its own: the caller passes the time.
 */
export class TokenBuckets {
  private readonly buckets = new Map<string, Bucket>();
  /** Set by each take that refused: how long that key has been over its rate (refused at least once a second). */
  overForMs = 0;

  constructor(
    private readonly ratePerSecond: number,
    private readonly burst: number,
    private readonly maxKeys: number,
  ) {}

  /**
   * Takes a token from `key`'s bucket at `nowMs`: 0 when it had one, else how many takes of this
   * key have been refused so far (1, 2, …): what a slip counts. After a refusal, `overForMs` says
   * how long the key has been over its rate.
   */
  take(key: string, nowMs: number): number {
    let bucket = this.buckets.get(key);
    if (bucket === undefined) {
      if (this.buckets.size >= this.maxKeys) this.forgetOldest();
      bucket = { tokens: this.burst, lastMs: nowMs, refused: 0, overSinceMs: 0, lastRefusedMs: -QUIET_MS };
      this.buckets.set(key, bucket);
    } else if (nowMs > bucket.lastMs) {
      bucket.tokens = Math.min(this.burst, bucket.tokens + ((nowMs - bucket.lastMs) * this.ratePerSecond) / 1000);
      bucket.lastMs = nowMs;
    }
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return 0;
    }
    if (nowMs - bucket.lastRefusedMs >= QUIET_MS) bucket.overSinceMs = nowMs;
    bucket.lastRefusedMs = nowMs;
    bucket.refused = (bucket.refused + 1) | 0 || 1;
    this.overForMs = nowMs - bucket.overSinceMs;
    return bucket.refused;
  }

  /** Keys held now. */
  get size(): number {
    return this.buckets.size;
  }

  private forgetOldest(): void {
    let n = Math.max(1, this.maxKeys >> 3);
    for (const key of this.buckets.keys()) {
      this.buckets.delete(key);
      if (--n === 0) break;
    }
  }
}
