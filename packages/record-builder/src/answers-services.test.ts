import { QTYPE, RCODE } from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import { createTestZone, group, svc } from './test-zone.js';

const Z = 'svc.cluster.local.';

function zoneWithServices() {
  const t = createTestZone();
  t.state.upsertService(
    svc('default', 'kubernetes', { clusterIPs: ['10.96.0.1'], ports: [{ name: 'https', port: 443, protocol: 'tcp' }] }),
  );
  t.state.upsertService(
    svc('shop', 'web', {
      clusterIPs: ['10.96.0.20', 'fd00::20'],
      ports: [
        { name: 'http', port: 80, protocol: 'tcp' },
        { name: 'dns', port: 53, protocol: 'udp' },
        { name: '', port: 9090, protocol: 'tcp' },
      ],
    }),
  );
  t.state.upsertService(svc('shop', 'v4only', { clusterIPs: ['10.96.0.21'] }));
  t.state.upsertService(svc('shop', 'pay', { kind: 'external-name', externalName: 'pay.example.org' }));
  return t;
}

describe('ClusterIP services', () => {
  it('answers A and AAAA for every cluster IP, authoritatively, with the record TTL', () => {
    const t = zoneWithServices();
    const a = t.ask(`web.shop.${Z}`, QTYPE.A);
    expect(a.flags).toMatchObject({ qr: true, aa: true, rcode: RCODE.NOERROR });
    expect(a.answers.map((r) => [r.address, r.ttl])).toEqual([['10.96.0.20', 30]]);
    expect(t.ask(`web.shop.${Z}`, QTYPE.AAAA).answers.map((r) => r.address)).toEqual(['fd00::20']);
  });

  it('answers NODATA with the SOA for the other family', () => {
    const r = createTestZone();
    r.state.upsertService(svc('shop', 'v4only', { clusterIPs: ['10.96.0.21'] }));
    const reply = r.ask(`v4only.shop.${Z}`, QTYPE.AAAA);
    expect(reply.flags.rcode).toBe(RCODE.NOERROR);
    expect(reply.answers).toEqual([]);
    expect(reply.authorities.map((a) => [a.type, a.name, a.soa?.minimum])).toEqual([[QTYPE.SOA, 'cluster.local.', 30]]);
  });

  it.each([
    ['_http._tcp', 80],
    ['_dns._udp', 53],
  ])('answers SRV %s with the port and the service as target, addresses in additional', (prefix, port) => {
    const t = zoneWithServices();
    const reply = t.ask(`${prefix}.web.shop.${Z}`, QTYPE.SRV);
    expect(reply.answers.map((r) => [r.priority, r.weight, r.port, r.target])).toEqual([
      [10, 100, port, `web.shop.${Z}`],
    ]);
    expect(
      reply.additionals
        .filter((r) => r.type !== QTYPE.OPT)
        .map((r) => r.address)
        .sort(),
    ).toEqual(['10.96.0.20', 'fd00::20']);
  });

  it('answers SRV on the bare name with one record per port, named or not', () => {
    const t = zoneWithServices();
    const reply = t.ask(`web.shop.${Z}`, QTYPE.SRV);
    expect(reply.answers.map((r) => [r.port, r.weight]).sort()).toEqual([
      [53, 33],
      [80, 33],
      [9090, 33],
    ]);
    expect(t.ask(`kubernetes.default.${Z}`, QTYPE.SRV).answers).toHaveLength(1);
  });

  it('has no SRV name for an unnamed port, and NXDOMAIN for a wrong protocol', () => {
    const t = zoneWithServices();
    expect(t.ask(`_http._udp.web.shop.${Z}`, QTYPE.SRV).flags.rcode).toBe(RCODE.NXDOMAIN);
    expect(t.ask(`_x._tcp.web.shop.${Z}`, QTYPE.SRV).flags.rcode).toBe(RCODE.NXDOMAIN);
  });

  it.each([[`_tcp.web.shop.${Z}`], [`shop.${Z}`], [Z], [`web.shop.${Z}`]])(
    'answers NODATA for the existing name %s asked for TXT',
    (name) => {
      const t = zoneWithServices();
      const reply = t.ask(name, QTYPE.TXT);
      expect(reply.flags).toMatchObject({ rcode: RCODE.NOERROR, aa: true });
      expect(reply.answers).toEqual([]);
      expect(reply.authorities[0]?.type).toBe(QTYPE.SOA);
    },
  );

  it.each([[`nope.shop.${Z}`], [`web.nope.${Z}`], [`x.web.shop.${Z}`], ['nope.cluster.local.']])(
    'answers NXDOMAIN with the SOA for %s',
    (name) => {
      const t = zoneWithServices();
      const reply = t.ask(name, QTYPE.A);
      expect(reply.flags).toMatchObject({ rcode: RCODE.NXDOMAIN, aa: true });
      expect(reply.authorities.map((r) => r.type)).toEqual([QTYPE.SOA]);
      expect(reply.authorities[0]?.ttl).toBe(30);
    },
  );

  it('answers PTR for each cluster IP, IPv4 and IPv6', () => {
    const t = zoneWithServices();
    expect(t.ask('20.0.96.10.in-addr.arpa.', QTYPE.PTR).answers.map((r) => r.target)).toEqual([`web.shop.${Z}`]);
    const v6 = `0.2.${'0.'.repeat(26)}0.0.d.f.ip6.arpa.`;
    expect(t.ask(v6, QTYPE.PTR).answers.map((r) => r.target)).toEqual([`web.shop.${Z}`]);
    expect(t.ask('99.0.96.10.in-addr.arpa.', QTYPE.PTR).flags.rcode).toBe(RCODE.NXDOMAIN);
    expect(t.ask('0.96.10.in-addr.arpa.', QTYPE.PTR).flags.rcode).toBe(RCODE.NOERROR);
  });

  it('answers CNAME for an ExternalName service, for A and CNAME queries', () => {
    const t = zoneWithServices();
    for (const type of [QTYPE.A, QTYPE.CNAME, QTYPE.AAAA]) {
      const reply = t.ask(`pay.shop.${Z}`, type);
      expect(reply.answers.map((r) => [r.type, r.target])).toEqual([[QTYPE.CNAME, 'pay.example.org.']]);
    }
  });

  it('answers CNAME queries on a ClusterIP name with NODATA, not NXDOMAIN (kube-dns quirk not copied)', () => {
    const t = zoneWithServices();
    const reply = t.ask(`web.shop.${Z}`, QTYPE.CNAME);
    expect(reply.flags.rcode).toBe(RCODE.NOERROR);
    expect(reply.answers).toEqual([]);
  });

  it('serves the schema version, the apex SOA and NS, and the NS target address', () => {
    const t = zoneWithServices();
    t.state.upsertService(svc('kube-system', 'kube-dns', { clusterIPs: ['10.96.0.10'] }));
    expect(t.ask('dns-version.cluster.local.', QTYPE.TXT).answers[0]?.text).toEqual(['1.1.0']);
    const soa = t.ask('cluster.local.', QTYPE.SOA).answers[0]?.soa;
    expect(soa).toMatchObject({ primary: 'ns.dns.cluster.local.', admin: 'hostmaster.cluster.local.', minimum: 30 });
    const ns = t.ask('cluster.local.', QTYPE.NS);
    expect(ns.answers.map((r) => r.target)).toEqual(['ns.dns.cluster.local.']);
    // RFC 1035 §3.3.11: the name server's address rides along.
    expect(ns.additionals.filter((r) => r.type !== QTYPE.OPT).map((r) => [r.name, r.address])).toEqual([
      ['ns.dns.cluster.local.', '10.96.0.10'],
    ]);
    expect(t.ask('ns.dns.cluster.local.', QTYPE.A).answers.map((r) => r.address)).toEqual(['10.96.0.10']);
  });

  it('changes the SOA serial when the zone changes', () => {
    const t = zoneWithServices();
    const before = t.ask('cluster.local.', QTYPE.SOA).answers[0]?.soa?.serial ?? 0;
    t.state.upsertService(svc('shop', 'new', { clusterIPs: ['10.96.0.99'] }));
    const after = t.ask('cluster.local.', QTYPE.SOA).answers[0]?.soa?.serial ?? 0;
    expect(after).toBeGreaterThan(before);
  });

  it('drops records of a deleted service and updates changed ones at once', () => {
    const t = zoneWithServices();
    expect(t.ask(`web.shop.${Z}`).answers).toHaveLength(1);
    t.state.upsertService(svc('shop', 'web', { clusterIPs: ['10.96.0.30'] }));
    expect(t.ask(`web.shop.${Z}`).answers.map((r) => r.address)).toEqual(['10.96.0.30']);
    expect(t.ask('20.0.96.10.in-addr.arpa.', QTYPE.PTR).flags.rcode).toBe(RCODE.NXDOMAIN);
    t.state.deleteService('shop', 'web');
    expect(t.ask(`web.shop.${Z}`).flags.rcode).toBe(RCODE.NXDOMAIN);
    expect(t.ask('30.0.96.10.in-addr.arpa.', QTYPE.PTR).flags.rcode).toBe(RCODE.NXDOMAIN);
  });

  it('keeps a PTR while another service still owns the same IP', () => {
    const t = createTestZone();
    t.state.upsertService(svc('a', 'one', { clusterIPs: ['10.96.5.5'] }));
    t.state.upsertService(svc('b', 'two', { clusterIPs: ['10.96.5.5'] }));
    t.state.deleteService('a', 'one');
    expect(t.ask('5.5.96.10.in-addr.arpa.', QTYPE.PTR).answers.map((r) => r.target)).toEqual([`two.b.${Z}`]);
  });

  it('does not need endpoints for a ClusterIP service to resolve', () => {
    const t = createTestZone();
    t.state.upsertService(svc('shop', 'legacy', { clusterIPs: ['10.96.0.50'] }));
    t.state.upsertGroup(group('shop', 'legacy', []));
    expect(t.ask(`legacy.shop.${Z}`).answers.map((r) => r.address)).toEqual(['10.96.0.50']);
  });
});
