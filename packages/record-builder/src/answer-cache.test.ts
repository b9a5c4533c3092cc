import { Buffer } from 'node:buffer';
import {
  buildQueryMessage,
  encodeMessage,
  FLAG,
  MessageWriter,
  type ParsedQuery,
  parseQuery,
  QTYPE,
} from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import { AnswerCache, MAX_SAME_HASH } from './answer-cache.js';

const ask = (name: string, type: number = QTYPE.A) => parseQuery(encodeMessage(buildQueryMessage(0, name, type)));

/** A template as the responder keeps it: the canonical question at the top, padded to `bytes`. */
function template(q: ParsedQuery, bytes: number): Buffer {
  const head = new MessageWriter(64).question(q.key, q.qtype, q.qclass).finish(0, FLAG.QR | FLAG.AA);
  return Buffer.concat([head, Buffer.alloc(Math.max(0, bytes - head.length))]);
}

const keep = (
  cache: AnswerCache,
  name: string,
  bytes: number,
  owners: string[],
  stable = true,
  type: number = QTYPE.A,
) => {
  const q = ask(name, type);
  cache.set(q, template(q, bytes), owners, stable);
};
const has = (cache: AnswerCache, name: string, type: number = QTYPE.A) => cache.get(ask(name, type)) !== undefined;

/** The query with its hash replaced: names that collide, however the per-process hash basis fell. */
const withHash = (q: ParsedQuery, nameHash: number): ParsedQuery =>
  Object.defineProperty(Object.create(q), 'nameHash', { value: nameHash }) as ParsedQuery;

describe('AnswerCache: ready answers, bounded by bytes, dropped by owner', () => {
  it('finds an answer by its question in any case, and only for its type', () => {
    const cache = new AnswerCache(1 << 20);
    keep(cache, 'web.shop.svc.cluster.local', 100, ['shop/web']);
    expect(has(cache, 'WEB.Shop.svc.cluster.local')).toBe(true);
    expect(has(cache, 'web.shop.svc.cluster.local', QTYPE.AAAA)).toBe(false);
    expect(has(cache, 'web2.shop.svc.cluster.local')).toBe(false);
    const q = ask('Web.shop.svc.cluster.local');
    expect(cache.get(q)?.subarray(12, q.questionEnd).toString('latin1')).toContain('web');
  });

  it('stays within its byte budget, dropping the least recently asked first', () => {
    const cache = new AnswerCache(64 * 1024);
    for (let i = 0; i < 200; i++) {
      keep(cache, `name-${i}.zone`, 1000, [`ns/svc-${i}`]);
      expect(has(cache, 'name-0.zone')).toBe(true);
    }
    expect(cache.bytes).toBeLessThanOrEqual(64 * 1024);
    expect(cache.size).toBeLessThan(200);
    expect(has(cache, 'name-0.zone')).toBe(true);
    expect(has(cache, 'name-1.zone')).toBe(false);
    expect(has(cache, 'name-199.zone')).toBe(true);
  });

  it('drops exactly the answers built from a changed Service, and every volatile one', () => {
    const cache = new AnswerCache(1 << 20);
    keep(cache, 'web.shop', 40, ['shop/web']);
    keep(cache, '_http._tcp.web.shop', 60, ['shop/web'], true, QTYPE.SRV);
    keep(cache, 'db.shop', 40, ['shop/db']);
    keep(cache, 'missing.shop', 30, [], false);
    cache.invalidate(['shop/web']);
    expect(has(cache, 'web.shop')).toBe(false);
    expect(has(cache, '_http._tcp.web.shop', QTYPE.SRV)).toBe(false);
    expect(has(cache, 'missing.shop')).toBe(false);
    expect(has(cache, 'db.shop')).toBe(true);
    expect(cache.size).toBe(1);
  });

  it('forgets the tags and hash lists of evicted answers, so they do not outgrow the cache', () => {
    const cache = new AnswerCache(8 * 1024);
    for (let i = 0; i < 2000; i++) keep(cache, `n-${i}.zone`, 500, [`ns/s-${i}`], i % 2 === 0);
    const inner = cache as unknown as {
      byOwner: Map<string, Set<string>>;
      volatile: Set<string>;
      byQuestion: Map<number, unknown[]>;
    };
    expect(inner.byOwner.size).toBe(cache.size);
    expect(inner.volatile.size).toBeLessThanOrEqual(cache.size);
    expect([...inner.byQuestion.values()].reduce((n, list) => n + list.length, 0)).toBe(cache.size);
  });

  it('keeps at most a few answers on one hash, oldest out, each still told apart by its name', () => {
    const cache = new AnswerCache(1 << 20);
    const names = Array.from({ length: MAX_SAME_HASH + 3 }, (_, i) => `collide-${i}.zone`);
    for (const name of names) {
      const q = withHash(ask(name), 7);
      cache.set(q, template(q, 50), [], true);
    }
    expect(cache.size).toBe(MAX_SAME_HASH);
    expect(cache.get(withHash(ask(names[0] as string), 7))).toBeUndefined();
    const last = names.at(-1) as string;
    const found = cache.get(withHash(ask(last), 7));
    expect(found?.toString('latin1')).toContain(last.split('.')[0]);
  });

  it('refuses an answer bigger than the whole budget instead of emptying itself', () => {
    const cache = new AnswerCache(4096);
    keep(cache, 'small.zone', 100, ['a/b']);
    keep(cache, 'huge.zone', 10_000, ['a/c'], true, QTYPE.ANY);
    expect(has(cache, 'huge.zone', QTYPE.ANY)).toBe(false);
    expect(has(cache, 'small.zone')).toBe(true);
  });
});
