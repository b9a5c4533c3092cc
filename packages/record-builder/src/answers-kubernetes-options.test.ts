import { buildIxfrQuery, QTYPE, RCODE, toFqdn, ZoneChangeReader } from '@cluster-dns/wire';
import type { V1EndpointSlice } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { toEndpointGroup } from './kube-objects.js';
import { createTestZone, group, svc } from './test-zone.js';

// The kubernetes plugin's options a Corefile gives the record-builder (Corefile mode).
const Z = 'svc.cluster.local.';

describe('namespaces: only the listed namespaces are answered', () => {
  function zone() {
    const t = createTestZone({ exposedNamespaces: ['shop'], pods: 'insecure' });
    t.state.upsertService(svc('shop', 'web', { clusterIPs: ['10.96.0.20'] }));
    t.state.upsertService(svc('secret', 'db', { clusterIPs: ['10.96.0.30'] }));
    return t;
  }

  it('answers a listed namespace’s Services and its PTRs', () => {
    const t = zone();
    expect(t.ask(`web.shop.${Z}`).answers.map((r) => r.address)).toEqual(['10.96.0.20']);
    expect(t.ask('20.0.96.10.in-addr.arpa', QTYPE.PTR).answers.map((r) => r.target)).toEqual([`web.shop.${Z}`]);
  });

  it('answers NXDOMAIN for another namespace’s Services, their PTRs, the namespace and its pods', () => {
    const t = zone();
    for (const [name, type] of [
      [`db.secret.${Z}`, QTYPE.A],
      [`secret.${Z}`, QTYPE.A],
      ['30.0.96.10.in-addr.arpa', QTYPE.PTR],
      ['10-244-1-5.secret.pod.cluster.local', QTYPE.A],
    ] as const)
      expect(t.ask(name, type).flags.rcode, name).toBe(RCODE.NXDOMAIN);
    expect(t.ask('10-244-1-5.shop.pod.cluster.local').answers.map((r) => r.address)).toEqual(['10.244.1.5']);
  });
});

describe('ignore empty_service: a ClusterIP Service with no endpoint is NXDOMAIN', () => {
  const slice = (ready: boolean) => group('shop', 'web', [{ ip: '10.244.1.9', ready }]);

  it('answers only while an endpoint is ready, and leaves headless and ExternalName Services as they are', () => {
    const t = createTestZone({ ignoreEmptyService: true });
    t.state.upsertService(svc('shop', 'web', { clusterIPs: ['10.96.0.20'] }));
    t.state.upsertService(svc('shop', 'pay', { kind: 'external-name', externalName: 'pay.example.org' }));
    expect(t.ask(`web.shop.${Z}`).flags.rcode).toBe(RCODE.NXDOMAIN);
    t.state.upsertGroup(slice(true));
    expect(t.ask(`web.shop.${Z}`).answers.map((r) => r.address)).toEqual(['10.96.0.20']);
    t.state.upsertGroup(slice(false));
    expect(t.ask(`web.shop.${Z}`).flags.rcode).toBe(RCODE.NXDOMAIN);
    expect(t.ask(`pay.shop.${Z}`, QTYPE.CNAME).answers.map((r) => r.target)).toEqual(['pay.example.org.']);
    // Without the option, as CoreDNS by default: the cluster IP whatever the endpoints.
    const plain = createTestZone();
    plain.state.upsertService(svc('shop', 'web', { clusterIPs: ['10.96.0.20'] }));
    expect(plain.ask(`web.shop.${Z}`).answers.map((r) => r.address)).toEqual(['10.96.0.20']);
  });

  it('lists the name in the IXFR when its first endpoint comes, so a forwarder drops its cached NXDOMAIN', () => {
    const t = createTestZone({ ignoreEmptyService: true, transferTo: ['10.0.0.5'], journalBytes: 1 << 20 });
    t.state.upsertService(svc('shop', 'web', { clusterIPs: ['10.96.0.20'] }));
    const serial = t.state.serial;
    t.state.upsertGroup(slice(true));
    const reader = new ZoneChangeReader();
    for (const m of t.messages(buildIxfrQuery(1, toFqdn('cluster.local'), serial), '10.0.0.5'))
      if (reader.push(m)) break;
    const result = reader.result;
    expect(result?.kind === 'incremental' && [...result.names]).toContain(`web.shop.${Z}`);
  });
});

describe('endpoint_pod_names: an endpoint without a hostname is named after its pod', () => {
  const slice = (endpoints: object[]) =>
    ({
      metadata: { namespace: 'data', name: 'pg-abc', labels: { 'kubernetes.io/service-name': 'pg' } },
      addressType: 'IPv4',
      endpoints,
    }) as V1EndpointSlice;

  it('takes the pod’s name, keeps a hostname where there is one, and the dashed IP for a name that is no label', () => {
    const endpoints = [
      { addresses: ['10.244.1.31'], targetRef: { kind: 'Pod', name: 'pg-7d9f8-x2x4q' } },
      { addresses: ['10.244.1.32'], hostname: 'pg-1', targetRef: { kind: 'Pod', name: 'pg-7d9f8-aaaaa' } },
      { addresses: ['10.244.1.33'], targetRef: { kind: 'Pod', name: `p${'x'.repeat(70)}` } },
      { addresses: ['10.244.1.34'], targetRef: { kind: 'Node', name: 'node-1' } },
    ];
    const named = toEndpointGroup(slice(endpoints), { podNames: true });
    const t = createTestZone();
    t.state.upsertService(svc('data', 'pg', { kind: 'headless' }));
    if (named) t.state.upsertGroup(named);
    expect(t.ask(`pg-7d9f8-x2x4q.pg.data.${Z}`).answers.map((r) => r.address)).toEqual(['10.244.1.31']);
    expect(t.ask(`pg-1.pg.data.${Z}`).answers.map((r) => r.address)).toEqual(['10.244.1.32']);
    expect(t.ask(`10-244-1-33.pg.data.${Z}`).answers.map((r) => r.address)).toEqual(['10.244.1.33']);
    expect(t.ask(`10-244-1-34.pg.data.${Z}`).answers.map((r) => r.address)).toEqual(['10.244.1.34']);
    // Without the option, the pod's name means nothing.
    const plain = toEndpointGroup(slice(endpoints));
    const u = createTestZone();
    u.state.upsertService(svc('data', 'pg', { kind: 'headless' }));
    if (plain) u.state.upsertGroup(plain);
    expect(u.ask(`pg-7d9f8-x2x4q.pg.data.${Z}`).flags.rcode).toBe(RCODE.NXDOMAIN);
  });
});
