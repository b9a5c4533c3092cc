import { type Fqdn, QTYPE, RCODE, toFqdn } from '@cluster-dns/wire';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { RouteUpstream } from '../../config/server-flag.js';
import { fakeUpstreams } from '../../testing/test-upstreams.js';
import { ServerHealth } from './server-health.js';
import { forwardQuery } from './upstream.js';

const question = { name: toFqdn('a.example.org'), qtype: QTYPE.A, qclass: 1, dnssecOk: false, checkingDisabled: false };
const DEAD = { host: '192.0.2.1', port: 53 };
const LIVE = { host: '192.0.2.2', port: 53 };
const upstream = (more: Partial<RouteUpstream> = {}): RouteUpstream => ({
  maxFails: 2,
  healthCheckMs: 500,
  healthRecursionDesired: true,
  healthDomain: '.' as Fqdn,
  failover: [],
  failfast: false,
  expireMs: 10_000,
  readTimeoutMs: undefined,
  ...more,
});

afterEach(() => {
  vi.useRealTimers();
});

describe('a forward’s max_fails and health_check', () => {
  it('asks a server that failed max_fails times in a row last, probes it, and asks it first again once it answers', async () => {
    vi.useFakeTimers();
    const probed: string[] = [];
    let deadAnswersProbes = false;
    const health = new ServerHealth(async (server) => {
      probed.push(server.host);
      return deadAnswersProbes;
    });
    const up = fakeUpstreams((server) =>
      server === '192.0.2.1#53'
        ? 'silent'
        : { answers: [{ name: 'a.example.org.', type: QTYPE.A, class: 1, ttl: 5, address: '192.0.2.9' }] },
    );
    const options = up.options({ health });
    const via = { upstream: upstream() };
    const asked = () => up.sent.map((s) => s.server);
    for (let i = 0; i < 2; i++) await forwardQuery([DEAD, LIVE], question, options, via);
    expect(asked()).toEqual(['192.0.2.1#53', '192.0.2.2#53', '192.0.2.1#53', '192.0.2.2#53']);
    expect(health.isDown('192.0.2.1#53')).toBe(true);
    // Down: the live one first, the dead one not asked while the live one answers.
    await forwardQuery([DEAD, LIVE], question, options, via);
    expect(asked().slice(4)).toEqual(['192.0.2.2#53']);
    // Probed every health_check interval; up again at the first answer.
    await vi.advanceTimersByTimeAsync(1000);
    expect(probed).toEqual(['192.0.2.1', '192.0.2.1']);
    deadAnswersProbes = true;
    await vi.advanceTimersByTimeAsync(500);
    expect(health.isDown('192.0.2.1#53')).toBe(false);
    await vi.advanceTimersByTimeAsync(2000);
    expect(probed).toHaveLength(3);
    health.close();
  });

  it('with failfast_all_unhealthy_upstreams, fails at once when every server is down; without, asks them anyway', async () => {
    vi.useFakeTimers();
    const health = new ServerHealth(async () => false);
    const up = fakeUpstreams(() => 'silent');
    const options = up.options({ health });
    const via = { upstream: upstream({ maxFails: 1, failfast: true }) };
    await expect(forwardQuery([DEAD], question, options, via)).rejects.toThrow();
    expect(up.sent).toHaveLength(1);
    await expect(forwardQuery([DEAD], question, options, via)).rejects.toThrow('tried none');
    expect(up.sent).toHaveLength(1);
    await expect(forwardQuery([DEAD], question, options, { upstream: upstream({ maxFails: 1 }) })).rejects.toThrow();
    expect(up.sent).toHaveLength(2);
    health.close();
  });

  it('asks the next server on a failover rcode, and never marks a server down with max_fails 0', async () => {
    const health = new ServerHealth(async () => true);
    const up = fakeUpstreams((server) => (server === '192.0.2.1#53' ? { rcode: RCODE.NXDOMAIN } : { answers: [] }));
    const reply = await forwardQuery([DEAD, LIVE], question, up.options({ health }), {
      upstream: upstream({ failover: [RCODE.NXDOMAIN], maxFails: 0 }),
    });
    expect(reply.readUInt16BE(2) & 0xf).toBe(RCODE.NOERROR);
    expect(up.sent.map((s) => s.server)).toEqual(['192.0.2.1#53', '192.0.2.2#53']);
    expect(health.isDown('192.0.2.1#53')).toBe(false);
  });
});
