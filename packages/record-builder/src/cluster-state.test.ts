import { toFqdn } from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import type { ServiceInfo } from './cluster-model.js';
import { ClusterState, ZONE_BIT } from './cluster-state.js';
import { packEndpointGroup } from './endpoint-group.js';

/** The store, and the zones each change reported touching (ZONE_BIT masks, in order). */
function store() {
  const seen: number[] = [];
  const state = new ClusterState(
    { zone: toFqdn('cluster.local'), reverseZones: [toFqdn('in-addr.arpa'), toFqdn('ip6.arpa')], ttlSeconds: 30 },
    (_owners, zones) => seen.push(zones),
  );
  return { state, last: () => seen.at(-1) };
}

const service = (name: string, kind: ServiceInfo['kind'], clusterIPs: string[] = []): ServiceInfo => ({
  namespace: 'shop',
  name,
  kind,
  clusterIPs,
  externalName: undefined,
  ports: [{ name: 'http', port: 80, protocol: 'tcp' }],
  publishNotReady: false,
});
const group = (serviceName: string, endpoints: Array<{ ip: string; hostname?: string; ready?: boolean }>) =>
  packEndpointGroup(
    {
      namespace: 'shop',
      name: `${serviceName}-abc`,
      serviceName,
      ports: [{ name: 'http', port: 80, protocol: 'tcp' }],
    },
    endpoints.map((e) => ({ addresses: [e.ip], ready: e.ready ?? true, terminating: false, hostname: e.hostname })),
  );

const { cluster, inAddr, ip6 } = ZONE_BIT;

describe('cluster state: which zones a change touches (NOTIFY only those)', () => {
  it('a ClusterIP Service: its cluster IPs reach the reverse zones; its endpoints only the cluster zone', () => {
    const s = store();
    s.state.upsertService(service('web', 'cluster-ip', ['10.96.1.10', 'fd00::10']));
    expect(s.last()).toBe(cluster | inAddr | ip6);
    s.state.upsertGroup(group('web', [{ ip: '10.244.1.1' }]));
    expect(s.last()).toBe(cluster);
    s.state.upsertGroup(group('web', [{ ip: '10.244.1.1', ready: false }]));
    expect(s.last()).toBe(cluster);
    // Ports changed, same addresses: the PTR still names the Service alone.
    s.state.upsertService({ ...service('web', 'cluster-ip', ['10.96.1.10', 'fd00::10']), ports: [] });
    expect(s.last()).toBe(cluster);
    s.state.upsertService(service('web', 'cluster-ip', ['10.96.1.11', 'fd00::10']));
    expect(s.last()).toBe(cluster | inAddr | ip6);
    s.state.deleteService('shop', 'web');
    expect(s.last()).toBe(cluster | inAddr | ip6);
  });

  it('a headless Service: each endpoint has a PTR, so its endpoints reach the reverse zone of their family', () => {
    const s = store();
    s.state.upsertService(service('db', 'headless'));
    expect(s.last()).toBe(cluster);
    s.state.upsertGroup(group('db', [{ ip: '10.244.1.5', hostname: 'db-0' }]));
    expect(s.last()).toBe(cluster | inAddr);
    // Same address, another hostname: the PTR's target moved.
    s.state.upsertGroup(group('db', [{ ip: '10.244.1.5', hostname: 'db-1' }]));
    expect(s.last()).toBe(cluster | inAddr);
    s.state.upsertGroup(group('db', [{ ip: 'fd00::5', hostname: 'db-1' }]));
    expect(s.last()).toBe(cluster | inAddr | ip6);
  });

  it('a pod record (--pods) is in the cluster zone only', () => {
    const s = store();
    s.state.upsertPod({ namespace: 'shop', name: 'p', ips: ['10.244.1.9'], searchDefault: true });
    expect(s.last()).toBe(cluster);
  });
});

describe('cluster state: the reverse index', () => {
  it('finds the owners of every address with a PTR, IPv4 of any range and IPv6, and forgets moved ones', () => {
    const s = store();
    s.state.upsertService(service('web', 'cluster-ip', ['192.168.10.1', 'fd00::10']));
    s.state.upsertService(service('db', 'headless'));
    s.state.upsertGroup(
      group('db', [
        { ip: '10.244.1.5', hostname: 'db-0' },
        { ip: '255.255.255.254', hostname: 'db-1' },
        { ip: '10.244.1.6' }, // no hostname: no PTR
      ]),
    );
    expect(s.state.ptrOwnersOf('192.168.10.1')).toEqual(['shop/web']);
    expect(s.state.ptrOwnersOf('fd00::10')).toEqual(['shop/web']);
    expect(s.state.ptrOwnersOf('10.244.1.5')).toEqual(['shop/db']);
    expect(s.state.ptrOwnersOf('255.255.255.254')).toEqual(['shop/db']);
    expect(s.state.ptrOwnersOf('10.244.1.6')).toEqual([]);
    expect(s.state.hasReversePrefix('192.168.10')).toBe(true);
    expect(s.state.hasReversePrefix('255.255')).toBe(true);

    s.state.upsertGroup(group('db', [{ ip: '10.244.1.5', hostname: 'db-0' }]));
    expect(s.state.ptrOwnersOf('255.255.255.254')).toEqual([]);
    expect(s.state.hasReversePrefix('255')).toBe(false);
    expect(s.state.hasReversePrefix('10.244.1')).toBe(true);
    s.state.deleteService('shop', 'web');
    expect(s.state.ptrOwnersOf('192.168.10.1')).toEqual([]);
    expect(s.state.hasReversePrefix('192')).toBe(false);
  });
});
