import { toFqdn } from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import { RouteTable } from './route-table.js';
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
