import { toFqdn } from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import { RouteTable, serversInTurn } from './route-table.js';
import { parseServerFlag } from './server-flag.js';

describe('the route table', () => {
  const table = new RouteTable({
    rules: ['/cluster.local/127.0.0.1#10053', '/in-addr.arpa/127.0.0.1#10053', '/blocked.example/', '192.0.2.53'].map(
      (f) => parseServerFlag(f),
    ),
    stubDomains: new Map([['acme.local', [{ host: '10.0.0.1', port: 53 }]]]),
    upstreamNameservers: [],
    resolvConf: [{ host: '192.0.2.54', port: 53 }],
  });

  it.each([
    ['web.shop.svc.cluster.local', 'cluster.local.', 'server'],
    ['cluster.local', 'cluster.local.', 'server'],
    ['db.acme.local', 'acme.local.', 'stub'],
    ['x.blocked.example', 'blocked.example.', 'local'],
    ['9.2.0.192.in-addr.arpa', 'in-addr.arpa.', 'server'],
    ['www.example.org', '.', 'upstream'],
    ['notcluster.local', '.', 'upstream'],
  ])('sends %s to the route of %s (%s): the longest suffix wins', (name, domain, kind) => {
    const route = table.routeFor(toFqdn(name));
    expect([route.domain, route.kind]).toEqual([domain, kind]);
  });

  it('puts --server servers before resolv.conf’s in the default route, and lets reverse routes fall through', () => {
    expect(table.upstream.servers.map((s) => s.host)).toEqual(['192.0.2.53', '192.0.2.54']);
    expect(table.routeFor(toFqdn('1.0.0.10.in-addr.arpa')).fallsThrough).toBe(true);
    expect(table.routeFor(toFqdn('a.cluster.local')).fallsThrough).toBe(false);
  });

  it('names the client only on routes whose servers are all the cluster’s DNS (node-local mode)', () => {
    const carrying = new RouteTable({
      rules: ['/cluster.local/10.96.0.10', '/mixed.example/10.96.0.10', '/mixed.example/192.0.2.9'].map((f) =>
        parseServerFlag(f),
      ),
      stubDomains: new Map([['acme.local', [{ host: '10.0.0.1', port: 53 }]]]),
      upstreamNameservers: [],
      resolvConf: [{ host: '192.0.2.54', port: 53 }],
      carryClientTo: ['10.96.0.10'],
    });
    const carries = (name: string) => carrying.routeFor(toFqdn(name)).carryClient;
    expect([
      carries('a.cluster.local'),
      carries('a.mixed.example'),
      carries('db.acme.local'),
      carries('example.org'),
    ]).toEqual([true, false, false, false]);
    expect(table.routeFor(toFqdn('a.cluster.local')).carryClient).toBe(false);
  });

  it('names each route by where it sends queries, so an unchanged route keeps its cached answers', () => {
    const again = new RouteTable({
      rules: [parseServerFlag('/cluster.local/127.0.0.1#10053')],
      stubDomains: new Map(),
      upstreamNameservers: [],
      resolvConf: [],
    });
    expect(again.routeFor(toFqdn('a.cluster.local')).id).toBe(table.routeFor(toFqdn('a.cluster.local')).id);
    expect(again.upstream.id).not.toBe(table.upstream.id);
  });
});

describe('which server is asked first (a Corefile forward’s policy)', () => {
  const servers = [1, 2, 3].map((i) => ({ host: `192.0.2.${i}`, port: 53 }));
  const routeWith = (policy: 'random' | 'round_robin' | 'sequential') =>
    new RouteTable({
      rules: [{ domains: [toFqdn('example.org')], servers, policy }],
      stubDomains: new Map(),
      upstreamNameservers: [],
      resolvConf: [],
    }).routeFor(toFqdn('www.example.org'));
  const firsts = (policy: 'random' | 'round_robin' | 'sequential', n: number) => {
    const route = routeWith(policy);
    return Array.from({ length: n }, () => serversInTurn(route)[0]?.host);
  };

  it('asks in order with sequential (and by default), from the next one each time with round_robin', () => {
    expect(new Set(firsts('sequential', 10))).toEqual(new Set(['192.0.2.1']));
    expect(firsts('round_robin', 6)).toEqual([
      '192.0.2.1',
      '192.0.2.2',
      '192.0.2.3',
      '192.0.2.1',
      '192.0.2.2',
      '192.0.2.3',
    ]);
    // Each order still holds every server once: the others are the fallbacks.
    expect(
      serversInTurn(routeWith('round_robin'))
        .map((s) => s.host)
        .sort(),
    ).toEqual(servers.map((s) => s.host));
  });

  it('spreads the first try over every server with random', () => {
    const counts = new Map<string, number>();
    for (const host of firsts('random', 600)) counts.set(host as string, (counts.get(host as string) ?? 0) + 1);
    expect([...counts.keys()].sort()).toEqual(servers.map((s) => s.host));
    // 200 each expected; each well away from 0 and from 600 (a fixed order would give 600 and 0).
    for (const n of counts.values()) expect(n).toBeGreaterThan(100);
  });
});
