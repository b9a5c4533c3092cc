import { QTYPE, RCODE } from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import { createTestZone, group, svc } from './test-zone.js';

const Z = 'svc.cluster.local.';
const pg = [{ name: 'pg', port: 5432, protocol: 'tcp' as const }];

function headlessZone(publishNotReady = false) {
  const t = createTestZone();
  t.state.upsertService(svc('data', 'db', { kind: 'headless', ports: pg, publishNotReady }));
  t.state.upsertGroup(
    group(
      'data',
      'db',
      [
        { ip: '10.244.0.1', hostname: 'db-0' },
        { ip: '10.244.0.2', hostname: 'db-1' },
        { ip: '10.244.0.3', hostname: 'db-2', ready: false },
        { ip: '10.244.0.4' },
      ],
      pg,
    ),
  );
  return t;
}

describe('headless services', () => {
  it('answers A with every ready endpoint and leaves not-ready ones out', () => {
    const t = headlessZone();
    expect(
      t
        .ask(`db.data.${Z}`)
        .answers.map((r) => r.address)
        .sort(),
    ).toEqual(['10.244.0.1', '10.244.0.2', '10.244.0.4']);
  });

  it('publishes not-ready endpoints when the service asks for it', () => {
    const t = headlessZone(true);
    expect(t.ask(`db.data.${Z}`).answers).toHaveLength(4);
    expect(t.ask(`db-2.db.data.${Z}`).answers.map((r) => r.address)).toEqual(['10.244.0.3']);
  });

  it('answers each hostname, and a dashed-IP name for an endpoint without one', () => {
    const t = headlessZone();
    expect(t.ask(`db-0.db.data.${Z}`).answers.map((r) => r.address)).toEqual(['10.244.0.1']);
    expect(t.ask(`10-244-0-4.db.data.${Z}`).answers.map((r) => r.address)).toEqual(['10.244.0.4']);
    expect(t.ask(`db-2.db.data.${Z}`).flags.rcode).toBe(RCODE.NXDOMAIN);
  });

  it('answers SRV per ready endpoint with its hostname as target and addresses in additional', () => {
    const t = headlessZone();
    const reply = t.ask(`_pg._tcp.db.data.${Z}`, QTYPE.SRV);
    expect(reply.answers.map((r) => r.target).sort()).toEqual([
      `10-244-0-4.db.data.${Z}`,
      `db-0.db.data.${Z}`,
      `db-1.db.data.${Z}`,
    ]);
    expect(reply.answers.every((r) => r.port === 5432 && r.weight === 33 && r.priority === 10)).toBe(true);
    expect(
      reply.additionals
        .filter((r) => r.type === QTYPE.A)
        .map((r) => r.address)
        .sort(),
    ).toEqual(['10.244.0.1', '10.244.0.2', '10.244.0.4']);
    expect(t.ask(`db.data.${Z}`, QTYPE.SRV).answers).toHaveLength(3);
  });

  it('answers PTR for endpoints with a hostname', () => {
    const t = headlessZone();
    expect(t.ask('1.0.244.10.in-addr.arpa.', QTYPE.PTR).answers.map((r) => r.target)).toEqual([`db-0.db.data.${Z}`]);
  });

  it('gives one A per IP when endpoints share a hostname (kube-dns keeps only the last)', () => {
    const t = createTestZone();
    t.state.upsertService(svc('data', 'dup', { kind: 'headless' }));
    t.state.upsertGroup(
      group('data', 'dup', [
        { ip: '10.244.9.1', hostname: 'same' },
        { ip: '10.244.9.2', hostname: 'same' },
      ]),
    );
    expect(
      t
        .ask(`same.dup.data.${Z}`)
        .answers.map((r) => r.address)
        .sort(),
    ).toEqual(['10.244.9.1', '10.244.9.2']);
  });

  it.each([3, 40])('keeps an address or a target given twice once, among %i endpoints', (count) => {
    // Short record lists are checked by scanning, long ones through an index: both must dedupe.
    const t = createTestZone();
    t.state.upsertService(svc('data', 'many', { kind: 'headless', ports: pg }));
    const endpoints = Array.from({ length: count }, (_, i) => ({ ip: `10.244.8.${i + 1}`, hostname: `m-${i}` }));
    // The last endpoint repeats the first one's address and hostname, in a second slice.
    t.state.upsertGroup(group('data', 'many', endpoints, pg, 'many-a'));
    t.state.upsertGroup(group('data', 'many', [{ ip: '10.244.8.1', hostname: 'm-0' }], pg, 'many-b'));
    const tcp = { transport: 'tcp' as const };
    const a = t.ask(`many.data.${Z}`, QTYPE.A, tcp);
    expect(a.answers.map((r) => r.address).sort()).toEqual(endpoints.map((e) => e.ip).sort());
    const srv = t.ask(`_pg._tcp.many.data.${Z}`, QTYPE.SRV, tcp);
    expect(srv.answers).toHaveLength(count);
    expect(new Set(srv.answers.map((r) => r.target)).size).toBe(count);
    expect(srv.additionals.filter((r) => r.type === QTYPE.A)).toHaveLength(count);
    expect(t.ask(`m-0.many.data.${Z}`).answers.map((r) => r.address)).toEqual(['10.244.8.1']);
  });

  it('answers A and AAAA at the name from addresses alone, and SRV there from every port', () => {
    // An address question builds no SRV records; the name's existence must not depend on them.
    const t = createTestZone();
    t.state.upsertService(svc('data', 'bare', { kind: 'headless' }));
    t.state.upsertGroup(group('data', 'bare', [{ ip: '10.244.3.1' }]));
    expect(t.ask(`bare.data.${Z}`).answers.map((r) => r.address)).toEqual(['10.244.3.1']);
    const aaaa = t.ask(`bare.data.${Z}`, QTYPE.AAAA);
    expect([aaaa.flags.rcode, aaaa.answers.length]).toEqual([RCODE.NOERROR, 0]);
    const noPorts = t.ask(`bare.data.${Z}`, QTYPE.SRV);
    expect([noPorts.flags.rcode, noPorts.answers.length]).toEqual([RCODE.NOERROR, 0]);
    const db = headlessZone();
    expect(db.ask(`db.data.${Z}`, QTYPE.AAAA).answers).toHaveLength(0);
    expect(
      db
        .ask(`db.data.${Z}`, QTYPE.SRV)
        .answers.map((r) => r.target)
        .sort(),
    ).toEqual([`10-244-0-4.db.data.${Z}`, `db-0.db.data.${Z}`, `db-1.db.data.${Z}`]);
    // RFC 8482: the A RRset alone, not the three A, three SRV and their glue.
    const any = db.ask(`db.data.${Z}`, QTYPE.ANY);
    expect(any.answers.map((r) => r.type)).toEqual([QTYPE.A, QTYPE.A, QTYPE.A]);
    expect(any.additionals.filter((r) => r.type !== QTYPE.OPT)).toEqual([]);
  });

  it('merges many EndpointSlices of one service and forgets a deleted slice', () => {
    const t = createTestZone();
    t.state.upsertService(svc('data', 'big', { kind: 'headless' }));
    t.state.upsertGroup(group('data', 'big', [{ ip: '10.244.1.1' }], [], 'big-a'));
    t.state.upsertGroup(group('data', 'big', [{ ip: '10.244.1.2' }], [], 'big-b'));
    expect(t.ask(`big.data.${Z}`).answers).toHaveLength(2);
    t.state.deleteGroup('data', 'big-a');
    expect(t.ask(`big.data.${Z}`).answers.map((r) => r.address)).toEqual(['10.244.1.2']);
  });

  it('answers NXDOMAIN for a headless service with no ready endpoints, and adds them when they turn ready', () => {
    const t = createTestZone();
    t.state.upsertService(svc('data', 'cold', { kind: 'headless' }));
    t.state.upsertGroup(group('data', 'cold', [{ ip: '10.244.2.1', ready: false }]));
    expect(t.ask(`cold.data.${Z}`).flags.rcode).toBe(RCODE.NXDOMAIN);
    t.state.upsertGroup(group('data', 'cold', [{ ip: '10.244.2.1', ready: true }]));
    expect(t.ask(`cold.data.${Z}`).answers.map((r) => r.address)).toEqual(['10.244.2.1']);
    t.state.upsertGroup(group('data', 'cold', [{ ip: '10.244.2.1', ready: false, terminating: true }]));
    expect(t.ask(`cold.data.${Z}`).flags.rcode).toBe(RCODE.NXDOMAIN);
  });

  it('updates SRV additional records when only an endpoint address changes', () => {
    const t = headlessZone();
    t.ask(`_pg._tcp.db.data.${Z}`, QTYPE.SRV);
    t.state.upsertGroup(group('data', 'db', [{ ip: '10.244.7.7', hostname: 'db-0' }], pg));
    const reply = t.ask(`_pg._tcp.db.data.${Z}`, QTYPE.SRV);
    expect(reply.additionals.filter((r) => r.type === QTYPE.A).map((r) => r.address)).toEqual(['10.244.7.7']);
  });
});

describe('pod records', () => {
  it.each([
    ['insecure', '10-244-1-5.shop.pod.cluster.local.', ['10.244.1.5']],
    ['insecure', 'fd00--5.shop.pod.cluster.local.', []],
    ['verified', '10-244-1-5.shop.pod.cluster.local.', undefined],
    ['disabled', '10-244-1-5.shop.pod.cluster.local.', undefined],
  ] as const)('with --pods=%s, %s answers %j', (mode, name, addresses) => {
    const t = createTestZone({ pods: mode });
    const reply = t.ask(name, QTYPE.A);
    if (addresses === undefined) expect(reply.flags.rcode).toBe(RCODE.NXDOMAIN);
    else expect(reply.answers.map((r) => r.address)).toEqual(addresses);
  });

  it('answers AAAA for the dashed IPv6 form', () => {
    const t = createTestZone();
    expect(t.ask('fd00--5.shop.pod.cluster.local.', QTYPE.AAAA).answers.map((r) => r.address)).toEqual(['fd00::5']);
  });

  it('with --pods=verified answers only IPs of pods in that namespace', () => {
    const t = createTestZone({ pods: 'verified' });
    t.state.upsertPod({ namespace: 'shop', name: 'web-0', ips: ['10.244.1.5'], searchDefault: true });
    expect(t.ask('10-244-1-5.shop.pod.cluster.local.').answers.map((r) => r.address)).toEqual(['10.244.1.5']);
    expect(t.ask('10-244-1-5.other.pod.cluster.local.').flags.rcode).toBe(RCODE.NXDOMAIN);
    t.state.deletePod('shop', 'web-0');
    expect(t.ask('10-244-1-5.shop.pod.cluster.local.').flags.rcode).toBe(RCODE.NXDOMAIN);
  });

  it('answers NXDOMAIN for a malformed address label (kube-dns says NODATA)', () => {
    const t = createTestZone();
    expect(t.ask('10-244-1.shop.pod.cluster.local.').flags.rcode).toBe(RCODE.NXDOMAIN);
    expect(t.ask('shop.pod.cluster.local.').flags.rcode).toBe(RCODE.NOERROR);
  });
});
