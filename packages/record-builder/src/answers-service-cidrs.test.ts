import { QTYPE, RCODE } from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import { createTestZone, svc } from './test-zone.js';

// A Service CIDR's reverse zones are the cluster's: an address in one without a Service is
// NXDOMAIN under that block's own zone (its SOA owner), which the forwarders keep rather than
// asking upstream; outside every block the denial stays the served zone's, as before.
function zone() {
  const t = createTestZone();
  t.state.upsertService(svc('default', 'kubernetes', { clusterIPs: ['10.96.0.1', 'fd00:10:96::1'] }));
  return t;
}
const soaOwner = (reply: { authorities: Array<{ type: number; name: string }> }) =>
  reply.authorities.filter((r) => r.type === QTYPE.SOA).map((r) => r.name);
const V6_ZONE = `${'0.'.repeat(15)}6.9.0.0.0.1.0.0.0.0.d.f.ip6.arpa.`;

describe('reverse zones of the Service CIDRs', () => {
  it('denies an unused address of a block under the block’s zone, and others under the served zone', () => {
    const t = zone();
    expect(soaOwner(t.ask('7.0.96.10.in-addr.arpa.', QTYPE.PTR))).toEqual(['in-addr.arpa.']);
    t.state.upsertServiceCidr({ name: 'kubernetes', cidrs: ['10.96.0.0/12', 'fd00:10:96::/108'] });
    const unused = t.ask('7.0.96.10.in-addr.arpa.', QTYPE.PTR);
    expect(unused.flags).toMatchObject({ aa: true, rcode: RCODE.NXDOMAIN });
    expect(soaOwner(unused)).toEqual(['96.10.in-addr.arpa.']);
    // The /12's last /16, and an IPv6 address of the /108.
    expect(soaOwner(t.ask('1.2.111.10.in-addr.arpa.', QTYPE.PTR))).toEqual(['111.10.in-addr.arpa.']);
    expect(soaOwner(t.ask(`7.0.0.0.0.${V6_ZONE}`, QTYPE.PTR))).toEqual([V6_ZONE]);
    // Just outside the block: the served zone's denial, which the forwarders may ask upstream.
    expect(soaOwner(t.ask('1.2.112.10.in-addr.arpa.', QTYPE.PTR))).toEqual(['in-addr.arpa.']);
    expect(soaOwner(t.ask('9.2.0.192.in-addr.arpa.', QTYPE.PTR))).toEqual(['in-addr.arpa.']);
    // A used address still answers its PTR.
    expect(t.ask('1.0.96.10.in-addr.arpa.', QTYPE.PTR).answers.map((r) => r.target)).toEqual([
      'kubernetes.default.svc.cluster.local.',
    ]);
  });

  it('answers each block zone’s apex SOA and NS, as a zone of its own', () => {
    const t = zone();
    t.state.upsertServiceCidr({ name: 'kubernetes', cidrs: ['10.96.0.0/12'] });
    const soa = t.ask('97.10.in-addr.arpa.', QTYPE.SOA);
    expect(soa.flags).toMatchObject({ aa: true, rcode: RCODE.NOERROR });
    expect(soa.answers.map((r) => [r.type, r.name])).toEqual([[QTYPE.SOA, '97.10.in-addr.arpa.']]);
    expect(t.ask('97.10.in-addr.arpa.', QTYPE.NS).answers.map((r) => r.target)).toEqual(['ns.dns.cluster.local.']);
  });

  it('follows the objects: a new block is the cluster’s at once, a deleted one no more, each change a new serial', () => {
    const t = zone();
    const serials = [t.state.serial];
    t.state.upsertServiceCidr({ name: 'kubernetes', cidrs: ['10.96.0.0/12'] });
    serials.push(t.state.serial);
    t.state.upsertServiceCidr({ name: 'extra', cidrs: ['10.200.0.0/16'] });
    serials.push(t.state.serial);
    expect(soaOwner(t.ask('5.0.200.10.in-addr.arpa.', QTYPE.PTR))).toEqual(['200.10.in-addr.arpa.']);
    // The same blocks again change nothing.
    t.state.upsertServiceCidr({ name: 'extra', cidrs: ['10.200.0.0/16'] });
    expect(t.state.serial).toBe(serials.at(-1));
    t.state.deleteServiceCidr('extra');
    serials.push(t.state.serial);
    expect(soaOwner(t.ask('5.0.200.10.in-addr.arpa.', QTYPE.PTR))).toEqual(['in-addr.arpa.']);
    expect(soaOwner(t.ask('7.0.96.10.in-addr.arpa.', QTYPE.PTR))).toEqual(['96.10.in-addr.arpa.']);
    expect(new Set(serials).size).toBe(4);
    expect(t.state.serviceCidrKeys()).toEqual(['/kubernetes']);
  });

  it('keeps --service-cidr’s blocks out of the keys a relist compares, so a relist never drops them', () => {
    const t = zone();
    t.state.upsertServiceCidr({ name: '--service-cidr', cidrs: ['10.96.0.0/12'] });
    expect(t.state.serviceCidrKeys()).toEqual([]);
    expect(soaOwner(t.ask('7.0.96.10.in-addr.arpa.', QTYPE.PTR))).toEqual(['96.10.in-addr.arpa.']);
  });
});
