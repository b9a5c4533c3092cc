import { fixtures } from '@cluster-dns/testkit';
import { QTYPE, RCODE, toFqdn } from '@cluster-dns/wire';
import type { V1EndpointSlice } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { ZONE_BIT } from './cluster-state.js';
import { type ServiceImportObject, toEndpointGroup, toServiceImportInfo } from './kube-objects.js';
import { createTestZone, group, svc } from './test-zone.js';
import { zoneContents } from './zone-transfer.js';

const CS = 'svc.clusterset.local.';
const https = [{ name: 'https', port: 443, protocol: 'tcp' as const }];

/** KEP-1645's examples: a ClusterSetIP import, a Headless one with endpoints in two clusters, and a local Service. */
function clustersetZone() {
  const t = createTestZone({ clustersetZone: 'clusterset.local' });
  t.state.upsertService(
    svc('test', 'myservice', { clusterIPs: ['10.42.42.42', 'fd00::42'], ports: https, clusterset: true }),
  );
  t.state.upsertService(svc('test', 'headless', { kind: 'headless', ports: https, clusterset: true }));
  t.state.upsertGroup(
    group(
      'test',
      'headless',
      [{ ip: '10.3.0.100', hostname: 'my-pet' }, { ip: '10.3.0.101' }],
      https,
      'headless-a',
      'cluster-a',
    ),
  );
  t.state.upsertGroup(
    group(
      'test',
      'headless',
      [
        { ip: '10.4.0.100', hostname: 'my-pet' },
        { ip: '10.4.0.102', ready: false, hostname: 'late' },
      ],
      https,
      'headless-b',
      'cluster-b',
    ),
  );
  // The same name in this cluster: its own records stay in cluster.local.
  t.state.upsertService(svc('test', 'myservice', { clusterIPs: ['10.96.0.7'], ports: https }));
  return t;
}

describe('clusterset.local (KEP-1645 DNS specification)', () => {
  it('answers its schema version and apex with SOA and NS, authoritatively', () => {
    const t = clustersetZone();
    const version = t.ask('dns-version.clusterset.local.', QTYPE.TXT);
    expect(version.flags.aa).toBe(true);
    expect(version.answers.map((r) => r.text)).toEqual([['1.0.0']]);
    expect(t.ask('clusterset.local.', QTYPE.SOA).answers.map((r) => r.type)).toEqual([QTYPE.SOA]);
    const ns = t.ask('clusterset.local.', QTYPE.NS);
    expect(ns.answers.map((r) => r.target)).toEqual(['ns.dns.cluster.local.']);
  });

  it('ClusterSetIP: A and AAAA of its clusterset IPs, SRV to its own name, apart from the local Service of that name', () => {
    const t = clustersetZone();
    expect(t.ask(`myservice.test.${CS}`).answers.map((r) => r.address)).toEqual(['10.42.42.42']);
    expect(t.ask(`myservice.test.${CS}`, QTYPE.AAAA).answers.map((r) => r.address)).toEqual(['fd00::42']);
    expect(t.ask('myservice.test.svc.cluster.local.').answers.map((r) => r.address)).toEqual(['10.96.0.7']);
    const srv = t.ask(`_https._tcp.myservice.test.${CS}`, QTYPE.SRV);
    expect(srv.answers.map((r) => [r.port, r.target])).toEqual([[443, `myservice.test.${CS}`]]);
    expect(srv.additionals.map((r) => r.address).sort()).toEqual(['10.42.42.42', 'fd00::42']);
  });

  it('ClusterSetIP: no name singles out one cluster (§2.3.4), and unknown names are NXDOMAIN', () => {
    const t = clustersetZone();
    t.state.upsertGroup(
      group('test', 'myservice', [{ ip: '10.3.0.9', hostname: 'web-0' }], https, 'myservice-a', 'cluster-a'),
    );
    expect(t.ask(`cluster-a.myservice.test.${CS}`).flags.rcode).toBe(RCODE.NXDOMAIN);
    expect(t.ask(`web-0.cluster-a.myservice.test.${CS}`).flags.rcode).toBe(RCODE.NXDOMAIN);
    expect(t.ask(`nothing.test.${CS}`).flags.rcode).toBe(RCODE.NXDOMAIN);
    expect(t.ask(`myservice.other.${CS}`).flags.rcode).toBe(RCODE.NXDOMAIN);
    // The namespace exists (NODATA) because an import is in it; svc. above it too.
    expect(t.ask(`test.${CS}`)).toMatchObject({ flags: { rcode: RCODE.NOERROR }, answers: [] });
  });

  it('Headless: every ready endpoint of every cluster at the base name, each host under its cluster id', () => {
    const t = clustersetZone();
    expect(
      t
        .ask(`headless.test.${CS}`)
        .answers.map((r) => r.address)
        .sort(),
    ).toEqual(['10.3.0.100', '10.3.0.101', '10.4.0.100']);
    expect(t.ask(`my-pet.cluster-a.headless.test.${CS}`).answers.map((r) => r.address)).toEqual(['10.3.0.100']);
    expect(t.ask(`my-pet.cluster-b.headless.test.${CS}`).answers.map((r) => r.address)).toEqual(['10.4.0.100']);
    // Not ready: no name. The cluster id alone is an empty non-terminal while it has endpoints.
    expect(t.ask(`late.cluster-b.headless.test.${CS}`).flags.rcode).toBe(RCODE.NXDOMAIN);
    expect(t.ask(`cluster-a.headless.test.${CS}`)).toMatchObject({ flags: { rcode: RCODE.NOERROR }, answers: [] });
    expect(t.ask(`cluster-c.headless.test.${CS}`).flags.rcode).toBe(RCODE.NXDOMAIN);
    // Without its cluster id a hostname is not a name of this zone.
    expect(t.ask(`my-pet.headless.test.${CS}`).flags.rcode).toBe(RCODE.NXDOMAIN);
  });

  it('Headless: SRV per ready endpoint to <host>.<clusterid>, with the addresses as glue', () => {
    const t = clustersetZone();
    const srv = t.ask(`_https._tcp.headless.test.${CS}`, QTYPE.SRV);
    expect(srv.answers.map((r) => r.target).sort()).toEqual([
      `10-3-0-101.cluster-a.headless.test.${CS}`,
      `my-pet.cluster-a.headless.test.${CS}`,
      `my-pet.cluster-b.headless.test.${CS}`,
    ]);
    expect(srv.additionals.map((r) => r.address).sort()).toEqual(['10.3.0.100', '10.3.0.101', '10.4.0.100']);
  });

  it('PTR: a clusterset IP to the import, an imported endpoint with a hostname to <host>.<clusterid>', () => {
    const t = clustersetZone();
    expect(t.ask('42.42.42.10.in-addr.arpa.', QTYPE.PTR).answers.map((r) => r.target)).toEqual([
      `myservice.test.${CS}`,
    ]);
    expect(t.ask('100.0.3.10.in-addr.arpa.', QTYPE.PTR).answers.map((r) => r.target)).toEqual([
      `my-pet.cluster-a.headless.test.${CS}`,
    ]);
  });

  it('a change to an import is a change of the clusterset zone, and its names go with it', () => {
    const t = clustersetZone();
    const zones: number[] = [];
    t.state.onChange((_owners, z) => zones.push(z));
    t.state.deleteImport('test', 'headless');
    // The clusterset zone, and in-addr.arpa for its endpoints' PTRs; not the cluster zone.
    expect(zones[0]).toBe(ZONE_BIT.clusterset | ZONE_BIT.inAddr);
    expect(t.ask(`headless.test.${CS}`).flags.rcode).toBe(RCODE.NXDOMAIN);
    expect(t.ask(`my-pet.cluster-a.headless.test.${CS}`).flags.rcode).toBe(RCODE.NXDOMAIN);
    // The local Service of the other name is untouched; the import's slices wait for it to return.
    t.state.deleteImport('test', 'myservice');
    expect(t.ask(`myservice.test.${CS}`).flags.rcode).toBe(RCODE.NXDOMAIN);
    expect(t.ask('myservice.test.svc.cluster.local.').answers.map((r) => r.address)).toEqual(['10.96.0.7']);
    expect(t.ask(CS).flags.rcode).toBe(RCODE.NXDOMAIN);
  });

  it('without a clusterset zone, an import has no names and clusterset.local is refused', () => {
    const t = createTestZone();
    expect(t.ask(`myservice.test.${CS}`).flags.rcode).toBe(RCODE.REFUSED);
  });

  it('the zone transfer holds the clusterset zone’s records under its zone', () => {
    const t = clustersetZone();
    const names = [...zoneContents(t.view)].flatMap(({ records }) => [...records.keys()]);
    const inClusterset = names.filter((n) => n.endsWith('clusterset.local.')).sort();
    expect(inClusterset).toEqual(
      [
        'dns-version.clusterset.local.',
        `myservice.test.${CS}`,
        `_https._tcp.myservice.test.${CS}`,
        `headless.test.${CS}`,
        `my-pet.cluster-a.headless.test.${CS}`,
        `10-3-0-101.cluster-a.headless.test.${CS}`,
        `my-pet.cluster-b.headless.test.${CS}`,
        `_https._tcp.headless.test.${CS}`,
      ].sort(),
    );
    expect(names).toContain(toFqdn('myservice.test.svc.cluster.local'));
  });

  it('reads ServiceImports and imported slices as an MCS controller writes them; without the zone, the slices are nothing', () => {
    const imported = fixtures.importedEndpointSlice('data', 'pg', 'pg-a', 'Cluster-A', [
      { addresses: ['10.1.0.10'], hostname: 'pg-0' },
    ]) as unknown as V1EndpointSlice;
    expect(toEndpointGroup(imported, { multicluster: true })).toMatchObject({
      serviceName: 'pg',
      clusterId: 'cluster-a',
    });
    expect(toEndpointGroup(imported)).toBeUndefined();
    const noCluster = structuredClone(imported);
    delete noCluster.metadata?.labels?.['multicluster.kubernetes.io/source-cluster'];
    expect(toEndpointGroup(noCluster, { multicluster: true })).toBeUndefined();
    // A slice of this cluster's own Service is read as before, with no cluster id.
    const own = fixtures.endpointSlice('data', 'pg', 'pg-x', [
      { addresses: ['10.244.0.1'] },
    ]) as unknown as V1EndpointSlice;
    expect(toEndpointGroup(own, { multicluster: true })?.clusterId).toBeUndefined();
    const headless = toServiceImportInfo(
      fixtures.serviceImport('data', 'pg', {
        type: 'Headless',
        ports: [{ name: 'pg', port: 5432 }],
      }) as ServiceImportObject,
    );
    expect(headless).toMatchObject({ kind: 'headless', clusterIPs: [], clusterset: true });
    const ip = toServiceImportInfo(
      fixtures.serviceImport('shop', 'cart', { ips: ['10.112.0.5', 'bogus'] }) as ServiceImportObject,
    );
    expect(ip).toMatchObject({ kind: 'cluster-ip', clusterIPs: ['10.112.0.5'] });
  });
});
