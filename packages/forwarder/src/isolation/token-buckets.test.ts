import { describe, expect, it } from 'vitest';
import { TokenBuckets } from './token-buckets.js';

describe('token buckets by key', () => {
  it('grants the burst at once, then the rate, counting each key’s refusals and how long it has been over', () => {
    const b = new TokenBuckets(10, 3, 100);
    expect([0, 0, 0].map(() => b.take('a', 0))).toEqual([0, 0, 0]);
    expect([b.take('a', 0), b.take('a', 0), b.take('a', 50)]).toEqual([1, 2, 3]);
    expect(b.overForMs).toBe(50);
    // Another key is untouched by the first one's flood.
    expect(b.take('b', 50)).toBe(0);
    // 100 ms at 10 a second is one token; the refusals go on counting after it.
    expect([b.take('a', 150), b.take('a', 150)]).toEqual([0, 4]);
    expect(b.overForMs).toBe(150);
    // Idle for long, the bucket holds the burst and no more, and the key is no longer over.
    expect([0, 1, 2, 3].map(() => b.take('a', 60_000))).toEqual([0, 0, 0, 5]);
    expect(b.overForMs).toBe(0);
  });

  it('keeps at most maxKeys, forgetting the ones seen first', () => {
    const b = new TokenBuckets(1, 1, 16);
    for (let i = 0; i < 16; i++) b.take(`k${i}`, 0);
    expect(b.take('k15', 0)).toBe(1);
    expect(b.size).toBe(16);
    b.take('new', 0);
    expect(b.size).toBe(15);
    // k0 was forgotten and starts full again; k15 was kept, still empty.
    expect([b.take('k0', 0), b.take('k15', 0)]).toEqual([0, 2]);
  });
});
