import { describe, expect, it } from 'vitest';
import { AnswerCache } from './answer-cache.js';

const wire = (bytes: number, fill = 1) => Buffer.alloc(bytes, fill);

describe('AnswerCache: ready answers, bounded by bytes, dropped by owner', () => {
  it('stays within its byte budget, dropping the least recently asked first', () => {
    const cache = new AnswerCache(64 * 1024);
    for (let i = 0; i < 200; i++) {
      cache.set(`name-${i}|1`, wire(1000), [`ns/svc-${i}`], true);
      cache.get('name-0|1');
    }
    expect(cache.bytes).toBeLessThanOrEqual(64 * 1024);
    expect(cache.size).toBeLessThan(200);
    expect(cache.get('name-0|1')).toBeDefined();
    expect(cache.get('name-1|1')).toBeUndefined();
    expect(cache.get('name-199|1')).toBeDefined();
  });

  it('drops exactly the answers built from a changed Service, and every volatile one', () => {
    const cache = new AnswerCache(1 << 20);
    cache.set('web.shop|1', wire(40), ['shop/web'], true);
    cache.set('_http._tcp.web.shop|33', wire(60), ['shop/web'], true);
    cache.set('db.shop|1', wire(40), ['shop/db'], true);
    cache.set('missing.shop|1', wire(30), [], false);
    cache.invalidate(['shop/web']);
    expect(cache.get('web.shop|1')).toBeUndefined();
    expect(cache.get('_http._tcp.web.shop|33')).toBeUndefined();
    expect(cache.get('missing.shop|1')).toBeUndefined();
    expect(cache.get('db.shop|1')).toBeDefined();
    expect(cache.size).toBe(1);
  });

  it('forgets the owner tags of evicted answers, so tags do not outgrow the cache', () => {
    const cache = new AnswerCache(8 * 1024);
    for (let i = 0; i < 10_000; i++) cache.set(`n-${i}|1`, wire(500), [`ns/s-${i}`], i % 2 === 0);
    const tags = (cache as unknown as { byOwner: Map<string, Set<string>>; volatile: Set<string> }).byOwner;
    const volatile = (cache as unknown as { volatile: Set<string> }).volatile;
    expect(tags.size).toBe(cache.size);
    expect(volatile.size).toBeLessThanOrEqual(cache.size);
  });

  it('refuses an answer bigger than the whole budget instead of emptying itself', () => {
    const cache = new AnswerCache(4096);
    cache.set('small|1', wire(100), ['a/b'], true);
    cache.set('huge|255', wire(10_000), ['a/c'], true);
    expect(cache.get('huge|255')).toBeUndefined();
    expect(cache.get('small|1')).toBeDefined();
  });
});
