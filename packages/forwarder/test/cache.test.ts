import { waitFor } from '@cluster-dns/testkit';
import { QTYPE, RCODE } from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import { startForwarder, upstream } from './harness.js';

const records = {
  'a.example.org.': [{ type: QTYPE.A, address: '192.0.2.1', ttl: 60 }],
  'b.example.org.': [{ type: QTYPE.A, address: '192.0.2.2', ttl: 60 }],
  'c.example.org.': [{ type: QTYPE.A, address: '192.0.2.3', ttl: 60 }],
};

describe('cache', () => {
  it('answers a repeat from the cache with the remaining TTL, and refetches after expiry', async () => {
    const up = await upstream({ records });
    const f = await startForwarder([`--server=${up.address}`, '--cache-size=100']);
    const first = await f.query('a.example.org', QTYPE.A);
    expect(first.answers[0]?.ttl).toBe(60);
    // The upstream set AA; a forwarder's answer is not authoritative, fetched or cached (RFC 1035 §6.1.3).
    expect(first.flags).toMatchObject({ aa: false, ra: true });
    f.clock.advance(10_500);
    const second = await f.query('A.example.ORG', QTYPE.A);
    expect(second.answers.map((a) => [a.address, a.ttl])).toEqual([['192.0.2.1', 50]]);
    expect(second.flags).toMatchObject({ aa: false, ra: true });
    expect(second.questions[0]?.name).toBe('A.example.ORG.');
    expect(up.queries).toHaveLength(1);
    expect(await f.stat('hits')).toEqual(['1']);
    f.clock.advance(50_000);
    expect((await f.query('a.example.org', QTYPE.A)).answers[0]?.ttl).toBe(60);
    expect(up.queries).toHaveLength(2);
  });

  it('evicts the least recently used entry at the size bound and counts it', async () => {
    const up = await upstream({ records });
    const f = await startForwarder([`--server=${up.address}`, '--cache-size=2']);
    for (const n of ['a', 'b', 'a', 'c']) await f.query(`${n}.example.org`, QTYPE.A);
    expect(await f.stat('insertions')).toEqual(['3']);
    expect(await f.stat('evictions')).toEqual(['1']);
    expect(await f.stat('hits')).toEqual(['1']);
    expect(await f.stat('misses')).toEqual(['3']);
    expect(await f.stat('cachesize')).toEqual(['2']);
    await f.query('a.example.org', QTYPE.A);
    await f.query('b.example.org', QTYPE.A);
    expect(up.queries.map((q) => q.name[0])).toEqual(['a', 'b', 'c', 'b']);
  });

  it('keys on the type and the DO bit, not only the name', async () => {
    const up = await upstream({ records });
    const f = await startForwarder([`--server=${up.address}`, '--cache-size=100']);
    await f.query('a.example.org', QTYPE.A);
    await f.query('a.example.org', QTYPE.AAAA);
    await f.query('a.example.org', QTYPE.A, { edns: { udpSize: 1232, dnssecOk: true } });
    expect(up.queries).toHaveLength(3);
  });

  it('caches NXDOMAIN for the SOA minimum, capped by --neg-ttl', async () => {
    const up = await upstream({ negativeTtl: 300 });
    const f = await startForwarder([`--server=${up.address}`, '--cache-size=100', '--neg-ttl=20']);
    const first = await f.query('nope.example.org', QTYPE.A);
    expect(first.flags.rcode).toBe(RCODE.NXDOMAIN);
    const second = await f.query('nope.example.org', QTYPE.A);
    expect(second.flags.rcode).toBe(RCODE.NXDOMAIN);
    expect(second.authorities[0]?.ttl).toBe(20);
    expect(up.queries).toHaveLength(1);
    f.clock.advance(21_000);
    await f.query('nope.example.org', QTYPE.A);
    expect(up.queries).toHaveLength(2);
  });

  it('caches NODATA too', async () => {
    const up = await upstream({ records, negativeTtl: 30 });
    const f = await startForwarder([`--server=${up.address}`, '--cache-size=100']);
    expect((await f.query('a.example.org', QTYPE.AAAA)).answers).toEqual([]);
    expect((await f.query('a.example.org', QTYPE.AAAA)).authorities[0]?.type).toBe(QTYPE.SOA);
    expect(up.queries).toHaveLength(1);
  });

  it('does not cache negative answers with --no-negcache', async () => {
    const up = await upstream({ negativeTtl: 300 });
    const f = await startForwarder([`--server=${up.address}`, '--cache-size=100', '--no-negcache']);
    await f.query('nope.example.org', QTYPE.A);
    await f.query('nope.example.org', QTYPE.A);
    expect(up.queries).toHaveLength(2);
  });

  it('does not cache SERVFAIL', async () => {
    const up = await upstream({ behaviour: 'servfail' });
    const f = await startForwarder([`--server=${up.address}`, '--cache-size=100']);
    expect((await f.query('a.example.org', QTYPE.A)).flags.rcode).toBe(RCODE.SERVFAIL);
    up.set({ behaviour: 'answer', records });
    expect((await f.query('a.example.org', QTYPE.A)).answers).toHaveLength(1);
  });

  it('clamps TTLs with --min-cache-ttl and --max-cache-ttl', async () => {
    const up = await upstream({
      records: { 'short.example.org.': [{ type: QTYPE.A, address: '192.0.2.7', ttl: 2 }], ...records },
    });
    const f = await startForwarder([
      `--server=${up.address}`,
      '--cache-size=100',
      '--min-cache-ttl=10',
      '--max-cache-ttl=30',
    ]);
    await f.query('short.example.org', QTYPE.A);
    f.clock.advance(5000);
    expect((await f.query('short.example.org', QTYPE.A)).answers[0]?.ttl).toBe(5);
    await f.query('a.example.org', QTYPE.A);
    expect((await f.query('a.example.org', QTYPE.A)).answers[0]?.ttl).toBe(30);
    expect(up.queries).toHaveLength(2);
  });

  it('does not cache at all with --cache-size=0', async () => {
    const up = await upstream({ records });
    const f = await startForwarder([`--server=${up.address}`, '--cache-size=0']);
    await f.query('a.example.org', QTYPE.A);
    await f.query('a.example.org', QTYPE.A);
    expect(up.queries).toHaveLength(2);
    expect(await f.stat('hits')).toEqual(['0']);
  });

  it('shares one upstream query among identical queries in flight', async () => {
    const up = await upstream({ records, hold: true });
    const f = await startForwarder([`--server=${up.address}`, '--cache-size=0']);
    const pending = Promise.all(Array.from({ length: 20 }, () => f.query('a.example.org', QTYPE.A)));
    // All 20 are in before the upstream answers the one question they share.
    await waitFor(() => f.forwarder.counters.misses === 20 && up.held() === 1, {
      what: '20 queries in and one question held upstream',
      seen: () => ({ misses: f.forwarder.counters.misses, held: up.held() }),
    });
    up.release();
    const replies = await pending;
    expect(replies.every((r) => r.answers[0]?.address === '192.0.2.1')).toBe(true);
    expect(up.queries).toHaveLength(1);
  });
});
