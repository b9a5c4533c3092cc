import { clientAddressOf, decodeMessage, HEADER_BYTES, QTYPE, RCODE, type Rr, toFqdn } from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import { RouteTable } from '../../config/route-table.js';
import { parseServerFlag } from '../../config/server-flag.js';
import { fakeUpstreams, routesOf } from '../../testing/test-upstreams.js';
import { resolveQuestion } from './resolution.js';

const question = (name: string, qtype: number = QTYPE.A) => ({
  name: toFqdn(name),
  qtype,
  qclass: 1,
  dnssecOk: false,
  checkingDisabled: false,
});
const A = (name: string, address: string, ttl = 60): Rr => ({ name, type: QTYPE.A, class: 1, ttl, address });
const CNAME = (name: string, target: string): Rr => ({ name, type: QTYPE.CNAME, class: 1, ttl: 60, target });

describe('resolution: one question through its route, without sockets', () => {
  it('keeps what a cache may keep: ID 0, no OPT, AA clear, RA set, the question in canonical case, TTLs clamped', async () => {
    const up = fakeUpstreams(() => ({
      answers: [A('mixed.example.org.', '192.0.2.1', 0x80000001), A('mixed.example.org.', '192.0.2.2', 30 * 86_400)],
    }));
    const routes = routesOf('192.0.2.53');
    const q = question('mixed.example.org');
    const { wire, scanned, route } = await resolveQuestion(routes, routes.routeFor(q.name), q, up.options());
    const m = decodeMessage(wire);
    expect(m.id).toBe(0);
    expect(m.flags).toMatchObject({ aa: false, ra: true, rcode: RCODE.NOERROR });
    expect(m.additionals).toEqual([]);
    expect(scanned.opt).toBeUndefined();
    expect(wire.subarray(HEADER_BYTES, HEADER_BYTES + 19).toString('latin1')).toBe('\x05mixed\x07example\x03org\x00');
    // RFC 2181 §8: a TTL with its top bit set is 0; RFC 8767 §4: none above 7 days.
    expect(m.answers.map((a) => a.ttl)).toEqual([0, 604_800]);
    expect(route.kind).toBe('upstream');
  });

  it('chases a CNAME that leaves a --server domain without an answer through the target’s route, as one answer', async () => {
    const up = fakeUpstreams((server, name) =>
      server === '127.0.0.1#10053'
        ? { answers: [CNAME(name, 'pay.example.org.')] }
        : { answers: [A('pay.example.org.', '192.0.2.7')] },
    );
    const routes = routesOf('/cluster.local/127.0.0.1#10053', '192.0.2.53');
    const q = question('pay.shop.svc.cluster.local');
    const { wire } = await resolveQuestion(routes, routes.routeFor(q.name), q, up.options());
    const m = decodeMessage(wire);
    expect(m.answers.map((a) => [a.type, a.name])).toEqual([
      [QTYPE.CNAME, 'pay.shop.svc.cluster.local.'],
      [QTYPE.A, 'pay.example.org.'],
    ]);
    expect(up.sent.map((s) => s.server)).toEqual(['127.0.0.1#10053', '192.0.2.53#53']);
  });

  it('names the client to the cluster’s DNS only: never on a fall-through or a chase to the upstreams', async () => {
    const up = fakeUpstreams((server, name) =>
      server === '10.96.0.10#53'
        ? name.endsWith('in-addr.arpa.')
          ? { rcode: RCODE.NXDOMAIN }
          : { answers: [CNAME(name, 'pay.example.org.')] }
        : { answers: [A('pay.example.org.', '192.0.2.7')] },
    );
    const routes = new RouteTable({
      rules: ['/cluster.local/10.96.0.10', '/in-addr.arpa/10.96.0.10', '192.0.2.53'].map((f) => parseServerFlag(f)),
      stubDomains: new Map(),
      upstreamNameservers: [],
      resolvConf: [],
      carryClientTo: ['10.96.0.10'],
    });
    for (const name of ['pay.shop.svc.cluster.local', '7.2.0.192.in-addr.arpa']) {
      const q = { ...question(name), clientAddress: '10.244.1.5' };
      await resolveQuestion(routes, routes.routeFor(q.name), q, up.options());
    }
    expect(up.sent.map((s) => [s.server, clientAddressOf(s.query)])).toEqual([
      ['10.96.0.10#53', '10.244.1.5'],
      ['192.0.2.53#53', undefined],
      ['10.96.0.10#53', '10.244.1.5'],
      ['192.0.2.53#53', undefined],
    ]);
  });

  it('does not chase what the default upstreams answered (they recurse themselves)', async () => {
    const up = fakeUpstreams((_server, name) => ({ answers: [CNAME(name, 'elsewhere.example.net.')] }));
    const routes = routesOf('192.0.2.53');
    const q = question('alias.example.org');
    await resolveQuestion(routes, routes.routeFor(q.name), q, up.options());
    expect(up.sent).toHaveLength(1);
  });

  it('drops what does not pertain to the question before anything keeps it (scrubbed)', async () => {
    const up = fakeUpstreams(() => ({
      answers: [A('asked.example.org.', '192.0.2.1'), A('victim.example.net.', '203.0.113.66')],
    }));
    const routes = routesOf('192.0.2.53');
    const q = question('asked.example.org');
    const { wire, scanned } = await resolveQuestion(routes, routes.routeFor(q.name), q, up.options());
    expect(decodeMessage(wire).answers.map((a) => a.name)).toEqual(['asked.example.org.']);
    expect(scanned.records).toHaveLength(1);
  });

  it('cuts an ANY answer down to one RRset, the addresses, with nothing in the other sections (RFC 8482)', async () => {
    const name = 'many.example.org.';
    const up = fakeUpstreams(() => ({
      answers: [
        { name, type: QTYPE.TXT, class: 1, ttl: 60, text: ['v=spf1 -all'] },
        A(name, '192.0.2.1'),
        { name, type: QTYPE.AAAA, class: 1, ttl: 60, address: '2001:db8::1' },
        A(name, '192.0.2.2'),
      ],
      authorities: [{ name: 'example.org.', type: QTYPE.NS, class: 1, ttl: 60, target: 'ns.example.org.' }],
      additionals: [A('ns.example.org.', '192.0.2.53')],
    }));
    const routes = routesOf('192.0.2.53');
    const q = question(name, QTYPE.ANY);
    const { wire, scanned } = await resolveQuestion(routes, routes.routeFor(q.name), q, up.options());
    const m = decodeMessage(wire);
    expect(m.flags).toMatchObject({ rcode: RCODE.NOERROR, ra: true, aa: false });
    expect(m.answers.map((a) => [a.type, 'address' in a ? a.address : ''])).toEqual([
      [QTYPE.A, '192.0.2.1'],
      [QTYPE.A, '192.0.2.2'],
    ]);
    expect([m.authorities, m.additionals]).toEqual([[], []]);
    expect(scanned.records).toHaveLength(2);
  });
});
