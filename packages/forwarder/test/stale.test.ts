import { QTYPE, RCODE } from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import { startForwarder, upstream } from './harness.js';

const records = { 'api.example.org.': [{ type: QTYPE.A, address: '192.0.2.10', ttl: 60 }] };
/** Upstream failures are quick here, so the stale answer follows the failure, not the 1.8 s timer. */
const QUICK = ['--upstream-timeout=200ms', '--forward-deadline=300ms'];

describe('serve-stale (RFC 8767) and prefetch', () => {
  it('answers an expired entry with TTL 30 when the upstream fails, asks again only after 30 s, and is fresh when it is back', async () => {
    const up = await upstream({ records });
    const f = await startForwarder([`--server=${up.address}`, '--cache-size=100', ...QUICK]);
    expect((await f.query('api.example.org', QTYPE.A)).answers[0]?.ttl).toBe(60);
    f.clock.advance(61_000);
    up.set({ behaviour: 'servfail' });
    const stale = await f.query('api.example.org', QTYPE.A);
    expect(stale.flags.rcode).toBe(RCODE.NOERROR);
    expect(stale.answers.map((a) => [a.address, a.ttl])).toEqual([['192.0.2.10', 30]]);
    const asked = up.queries.length;
    // Within the failure recheck timer: stale at once, the upstream left alone.
    f.clock.advance(10_000);
    expect((await f.query('api.example.org', QTYPE.A)).answers[0]?.ttl).toBe(30);
    expect(up.queries.length).toBe(asked);
    // After it, and with the upstream back: a fresh answer, cached again.
    up.set({
      behaviour: 'answer',
      records: { 'api.example.org.': [{ type: QTYPE.A, address: '192.0.2.11', ttl: 60 }] },
    });
    f.clock.advance(21_000);
    const fresh = await f.query('api.example.org', QTYPE.A);
    expect(fresh.answers.map((a) => [a.address, a.ttl])).toEqual([['192.0.2.11', 60]]);
    const metrics = await (await fetch(`http://127.0.0.1:${f.metricsPort}/metrics`)).text();
    expect(metrics).toMatch(/^clusterdns_forwarder_stale_answers_total 2$/m);
  });

  it('gives SERVFAIL, not a stale answer, once --use-stale-cache has passed, or for --server=/domain/ routes', async () => {
    const up = await upstream({ records });
    const f = await startForwarder([`--server=${up.address}`, '--cache-size=100', '--use-stale-cache=60', ...QUICK]);
    await f.query('api.example.org', QTYPE.A);
    up.set({ behaviour: 'servfail' });
    f.clock.advance(60_000 + 61_000);
    expect((await f.query('api.example.org', QTYPE.A)).flags.rcode).toBe(RCODE.SERVFAIL);

    const domain = await startForwarder([`--server=/example.org/${up.address}`, '--cache-size=100', ...QUICK]);
    up.set({ behaviour: 'answer' });
    await domain.query('api.example.org', QTYPE.A);
    up.set({ behaviour: 'servfail' });
    domain.clock.advance(61_000);
    expect((await domain.query('api.example.org', QTYPE.A)).flags.rcode).toBe(RCODE.SERVFAIL);
  });

  it('answers stale after the 1.8 s client response timer when the upstream is silent, and caches the late answer', async () => {
    const up = await upstream({ records });
    // The upstream may take 10 s: at 1.8 s it has not failed, it is only slow.
    const f = await startForwarder([
      `--server=${up.address}`,
      '--cache-size=100',
      '--upstream-timeout=10s',
      '--forward-deadline=10s',
    ]);
    await f.query('api.example.org', QTYPE.A);
    f.clock.advance(61_000);
    // It holds the refresh until the test releases it: the stale answer must come first.
    up.set({ hold: true, records: { 'api.example.org.': [{ type: QTYPE.A, address: '192.0.2.12', ttl: 60 }] } });
    const started = performance.now();
    const stale = await f.query('api.example.org', QTYPE.A);
    const took = performance.now() - started;
    expect(stale.answers.map((a) => [a.address, a.ttl])).toEqual([['192.0.2.10', 30]]);
    // Not before the client response timer (a busy machine can only make it later), and while the
    // upstream still holds the question.
    expect(took).toBeGreaterThanOrEqual(1700);
    expect(up.held()).toBe(1);
    up.release();
    await expect
      .poll(async () => (await f.query('api.example.org', QTYPE.A)).answers[0]?.address, { timeout: 5000 })
      .toBe('192.0.2.12');
  });

  it('refreshes an entry asked often before it expires, once', async () => {
    const up = await upstream({ records });
    const f = await startForwarder([`--server=${up.address}`, '--cache-size=100']);
    await f.query('api.example.org', QTYPE.A);
    await f.query('api.example.org', QTYPE.A);
    expect(up.queries).toHaveLength(1);
    // 55 s on, under a tenth of the TTL is left: this hit starts one background refresh.
    f.clock.advance(55_000);
    up.set({ records: { 'api.example.org.': [{ type: QTYPE.A, address: '192.0.2.13', ttl: 60 }] } });
    const hit = await f.query('api.example.org', QTYPE.A);
    expect(hit.answers.map((a) => [a.address, a.ttl])).toEqual([['192.0.2.10', 5]]);
    await expect
      .poll(async () => (await f.query('api.example.org', QTYPE.A)).answers[0]?.address, { timeout: 5000 })
      .toBe('192.0.2.13');
    expect(up.queries).toHaveLength(2);
  });
});
