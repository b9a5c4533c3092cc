import { createSilentLogger } from '@cluster-dns/runtime';
import { HEADER_BYTES, QTYPE, RCODE } from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import { RESOLVED } from '../../config/forwarder-request.js';
import { askThrough, requestFor } from '../../testing/test-chain.js';
import { fakeUpstreams, routesOf } from '../../testing/test-upstreams.js';
import { ForwardStage } from './forward-stage.js';
import { RouteBudget } from './route-budget.js';
import type { ForwardOptions } from './upstream.js';

const A = (name: string, address: string) => ({ name, type: QTYPE.A, class: 1, ttl: 60, address }) as const;

function forwardUnderTest(forward: ForwardOptions, flags: string[], forwardMax = 150) {
  const routes = routesOf(...flags);
  const clock = { ms: 0 };
  const budget = new RouteBudget(forwardMax, 200, () => clock.ms);
  const stage = new ForwardStage({
    routes: () => routes,
    budget,
    forward,
    log: createSilentLogger(),
    logQueries: false,
  });
  return { stage, budget, clock, ask: askThrough((request) => stage.serve(request)) };
}

/**
 * Upstreams where `held(server)` servers never answer until the test releases them, honouring the
 * asker's cancellation as the real exchanges do; the others answer at once.
 */
function holdingUpstreams(held: (server: string) => boolean) {
  const up = fakeUpstreams((_server, name) => ({ answers: [A(name, '192.0.2.9')] }));
  const options = up.options();
  const answer = options.exchangeUdp;
  const waiting: Array<{ server: string; release: () => void }> = [];
  options.exchangeUdp = (server, query, exchange) => {
    const id = `${server.host}#${server.port}`;
    if (!held(id)) return answer(server, query, exchange);
    return new Promise((resolve, reject) => {
      const entry = { server: id, release: () => resolve(answer(server, query, exchange)) };
      waiting.push(entry);
      exchange.cancel?.listen((reason) => {
        waiting.splice(waiting.indexOf(entry), 1);
        reject(reason);
      });
    });
  };
  return { options, waiting };
}

const rcodeOf = (reply: unknown) => (reply as Buffer).readUInt16BE(2) & 0xf;

describe('the forward stage, without sockets', () => {
  it('writes no reply of its own when the cache stage writes it from what it resolved', async () => {
    const up = fakeUpstreams(() => ({ answers: [A('www.example.org.', '192.0.2.9')] }));
    const { stage } = forwardUnderTest(up.options(), ['192.0.2.53']);
    const request = { ...requestFor('www.example.org'), repliesFromResolved: true as const };
    expect(await stage.serve(request)).toBe(RESOLVED);
    expect(request.resolved?.scanned.rcode).toBe(RCODE.NOERROR);
  });

  it('answers from the route’s server and leaves the normalised answer for the cache', async () => {
    const up = fakeUpstreams(() => ({ answers: [A('www.example.org.', '192.0.2.9')] }));
    const { stage } = forwardUnderTest(up.options(), ['192.0.2.53']);
    const request = requestFor('WWW.Example.org');
    const reply = (await stage.serve(request)) as Buffer;
    expect(reply.readUInt16BE(0)).toBe(7);
    // The asker's spelling in its reply; the cache's copy has ID 0, our canonical case, no OPT, AA clear.
    expect(reply.subarray(HEADER_BYTES, HEADER_BYTES + 17).toString('latin1')).toContain('WWW');
    const resolved = request.resolved;
    expect(resolved?.wire.readUInt16BE(0)).toBe(0);
    expect(resolved?.wire.subarray(HEADER_BYTES, HEADER_BYTES + 17).toString('latin1')).toBe(
      '\x03www\x07example\x03org\x00',
    );
    expect(resolved?.scanned.opt).toBeUndefined();
    expect((resolved?.wire.readUInt16BE(2) ?? 0) & 0x0400).toBe(0);
    expect(resolved?.route.kind).toBe('upstream');
  });

  it('answers NXDOMAIN itself for a --server=/domain/ without servers, asking nobody', async () => {
    const up = fakeUpstreams(() => ({}));
    const { ask } = forwardUnderTest(up.options(), ['/blocked.example.org/', '192.0.2.53']);
    expect((await ask('x.blocked.example.org')).flags.rcode).toBe(RCODE.NXDOMAIN);
    expect(up.sent).toHaveLength(0);
  });

  it('answers SERVFAIL when no server answered, and leaves nothing for the cache', async () => {
    const up = fakeUpstreams(() => 'silent');
    const { stage } = forwardUnderTest(up.options(), ['192.0.2.53']);
    const request = requestFor('down.example.org');
    const reply = (await stage.serve(request)) as Buffer;
    expect(reply.readUInt16BE(2) & 0xf).toBe(RCODE.SERVFAIL);
    expect(request.resolved).toBeUndefined();
  });

  it('gives each route a share of its own: a black-holed upstream fills only its own, the cluster zone is still asked', async () => {
    const up = holdingUpstreams((server) => server === '192.0.2.53#53');
    const { stage, budget, ask } = forwardUnderTest(
      up.options,
      ['/cluster.local/127.0.0.1#10053', '/in-addr.arpa/127.0.0.1#10053', '192.0.2.53'],
      2,
    );
    void stage.serve(requestFor('a.example.org'));
    void stage.serve(requestFor('b.example.org'));
    expect(rcodeOf(stage.serve(requestFor('c.example.org')))).toBe(RCODE.REFUSED);
    // The outside route is full; the cluster zone's and the reverse zone's shares are untouched.
    expect((await ask('web.shop.svc.cluster.local')).answers).toHaveLength(1);
    expect((await ask('web.shop.svc.cluster.local')).flags.rcode).toBe(RCODE.NOERROR);
    expect(budget.inFlightByRoute()).toEqual([['.', 2]]);
    expect(Object.fromEntries(budget.counts.refused)).toEqual({ '.': 1 });
    for (const w of up.waiting.splice(0)) w.release();
    await stage.settled();
    expect(budget.inFlight()).toBe(0);
  });

  it('lets a newcomer push out the question that has waited past the jostle bound: SERVFAIL for it, its exchange ended', async () => {
    const up = holdingUpstreams(() => true);
    const { stage, budget, clock } = forwardUnderTest(up.options, ['192.0.2.53'], 2);
    const first = stage.serve(requestFor('first.example.org'));
    clock.ms = 150;
    const second = stage.serve(requestFor('second.example.org'));
    // The oldest has waited 150 ms, under the 200 ms bound: the newcomer is refused.
    expect(rcodeOf(stage.serve(requestFor('early.example.org')))).toBe(RCODE.REFUSED);
    clock.ms = 250;
    const third = stage.serve(requestFor('third.example.org'));
    expect(rcodeOf(await first)).toBe(RCODE.SERVFAIL);
    expect(up.waiting.map((w) => w.server)).toEqual(['192.0.2.53#53', '192.0.2.53#53']);
    expect(Object.fromEntries(budget.counts.jostled)).toEqual({ '.': 1 });
    expect(budget.inFlight()).toBe(2);
    for (const w of up.waiting.splice(0)) w.release();
    expect([rcodeOf(await second), rcodeOf(await third)]).toEqual([RCODE.NOERROR, RCODE.NOERROR]);
    await stage.settled();
    expect(budget.inFlight()).toBe(0);
  });

  it('refuses at once past --dns-forward-max questions in flight, counted', async () => {
    let release: () => void = () => {};
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const up = fakeUpstreams(() => ({ answers: [A('one.example.org.', '192.0.2.9')] }));
    const slow = up.options();
    const exchange = slow.exchangeUdp;
    slow.exchangeUdp = async (...args) => {
      await gate;
      return exchange(...args);
    };
    const { stage, ask } = forwardUnderTest(slow, ['192.0.2.53'], 1);
    const first = ask('one.example.org');
    const second = stage.serve(requestFor('two.example.org'));
    expect(Buffer.isBuffer(second)).toBe(true);
    expect((second as Buffer).readUInt16BE(2) & 0xf).toBe(RCODE.REFUSED);
    expect(stage.maxConcurrentRejects).toBe(1);
    expect(stage.inFlight()).toBe(1);
    release();
    expect((await first).answers).toHaveLength(1);
    await stage.settled();
    expect(stage.inFlight()).toBe(0);
  });

  it('asks the upstreams again for a reverse name the cluster does not know (kube-dns falls through)', async () => {
    const up = fakeUpstreams((server) => (server === '127.0.0.1#10053' ? { rcode: RCODE.NXDOMAIN } : { answers: [] }));
    const { ask } = forwardUnderTest(up.options(), ['/in-addr.arpa/127.0.0.1#10053', '192.0.2.53']);
    expect((await ask('9.2.0.192.in-addr.arpa', QTYPE.PTR)).flags.rcode).toBe(RCODE.NOERROR);
    expect(up.sent.map((s) => s.server)).toEqual(['127.0.0.1#10053', '192.0.2.53#53']);
  });

  it('keeps the denial of a zone the cluster owns (a Service CIDR’s reverse zone), never asking upstream', async () => {
    const soa = (zone: string) => ({
      name: zone,
      type: QTYPE.SOA,
      class: 1,
      ttl: 30,
      soa: {
        primary: 'ns.dns.cluster.local.',
        admin: 'hostmaster.cluster.local.',
        serial: 7,
        refresh: 7200,
        retry: 1800,
        expiration: 86400,
        minimum: 30,
      },
    });
    const denial = (zone: string, authoritative = true) => ({
      rcode: RCODE.NXDOMAIN,
      authorities: [soa(zone)],
      authoritative,
    });
    const up = fakeUpstreams((server, name) =>
      server !== '127.0.0.1#10053'
        ? { answers: [] }
        : name.endsWith('.96.10.in-addr.arpa.')
          ? denial('96.10.in-addr.arpa.')
          : name.endsWith('.97.10.in-addr.arpa.')
            ? denial('97.10.in-addr.arpa.', false)
            : denial('in-addr.arpa.'),
    );
    const { ask } = forwardUnderTest(up.options(), ['/in-addr.arpa/127.0.0.1#10053', '192.0.2.53']);
    // Inside the Service CIDR: the record-builder's NXDOMAIN names 96.10.in-addr.arpa, and stands.
    expect((await ask('7.0.96.10.in-addr.arpa', QTYPE.PTR)).flags.rcode).toBe(RCODE.NXDOMAIN);
    expect(up.sent.map((s) => s.server)).toEqual(['127.0.0.1#10053']);
    // Its SOA at the route's own zone (an address outside every Service CIDR): asked upstream again.
    expect((await ask('9.2.0.192.in-addr.arpa', QTYPE.PTR)).flags.rcode).toBe(RCODE.NOERROR);
    // A narrower SOA without AA is no authority's word: asked upstream again too.
    expect((await ask('7.0.97.10.in-addr.arpa', QTYPE.PTR)).flags.rcode).toBe(RCODE.NOERROR);
    expect(up.sent.map((s) => s.server)).toEqual([
      '127.0.0.1#10053',
      '127.0.0.1#10053',
      '192.0.2.53#53',
      '127.0.0.1#10053',
      '192.0.2.53#53',
    ]);
  });
});
