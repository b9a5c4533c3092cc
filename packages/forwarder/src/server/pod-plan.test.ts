import { readFileSync } from 'node:fs';
import { CorefileError, readCorefile } from '@cluster-dns/runtime';
import { toFqdn } from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import { RouteTable } from '../config/route-table.js';
import { planPod } from './pod-plan.js';

const KUBEADM = readFileSync(new URL('../../../../test/fixtures/kubeadm.Corefile', import.meta.url), 'utf8');
const RB = { host: '127.0.0.1', port: 10053 };
const plan = (text: string) => planPod(readCorefile(text, { mode: 'pod' }), RB);
const routesOf = (text: string) => {
  const p = plan(text);
  const root = p.root && Array.isArray(p.root.servers) ? p.root.servers : [];
  return new RouteTable({
    rules: [...p.rules, { domains: [], servers: root }],
    stubDomains: new Map(),
    upstreamNameservers: [],
    resolvConf: [{ host: '192.0.2.53', port: 53 }],
    upstream: p.root ? { forceTcp: p.root.forceTcp, cache: p.root.cache, policy: p.root.policy } : undefined,
  });
};
const errorOf = (text: string) => {
  try {
    plan(text);
  } catch (error) {
    if (error instanceof CorefileError) return error;
    throw error;
  }
  throw new Error('no error');
};

describe('a Pod’s Corefile as the forwarder runs it', () => {
  it('runs kubeadm’s: the kubernetes zones to the record-builder, reverse ones falling through, the rest to resolv.conf', () => {
    const p = plan(KUBEADM);
    expect([p.listenAddresses, p.port, p.metrics?.port, p.health?.port, p.lameduckMs]).toEqual([
      ['0.0.0.0'],
      53,
      9153,
      8080,
      5000,
    ]);
    const routes = routesOf(KUBEADM);
    const cluster = routes.routeFor(toFqdn('web.shop.svc.cluster.local'));
    expect([cluster.servers, cluster.fallsThrough]).toEqual([[RB], false]);
    const reverse = routes.routeFor(toFqdn('1.0.96.10.in-addr.arpa'));
    expect([reverse.servers, reverse.fallsThrough]).toEqual([[RB], true]);
    expect(routes.routeFor(toFqdn('www.example.org')).kind).toBe('upstream');
    expect(p.root?.servers).toEqual({ resolvFile: '/etc/resolv.conf' });
    expect(p.root?.policy).toBe('random');
    // cache 30, with cluster.local's successes and denials not cached (disable), the rest capped at 30 s.
    expect(cluster.cache).toMatchObject({ maxCacheTtlSeconds: 30, disable: { success: true, denial: true } });
    expect(reverse.cache).toMatchObject({ maxCacheTtlSeconds: 30, negTtlSeconds: 30 });
    expect(reverse.cache).not.toHaveProperty('disable');
    expect(p.cacheSize).toBe(2 * 9984);
    expect([p.forwardMax, p.loopDetect, p.reloadMs, p.loadbalance]).toEqual([1000, true, 30_000, ['.']]);
  });

  it('walks the pods’ search paths with autopath @kubernetes, which needs pods verified', () => {
    const block = (pods: string, autopath = 'autopath @kubernetes') =>
      `.:53 {\n ${autopath}\n kubernetes cluster.local in-addr.arpa {\n  pods ${pods}\n }\n forward . 192.0.2.53\n}`;
    expect(plan(block('verified')).autopathZone).toBe('cluster.local.');
    expect(plan(KUBEADM).autopathZone).toBeUndefined();
    expect(errorOf(block('insecure')).message).toMatch(/line 2.*autopath: @kubernetes needs .*pods verified/);
    expect(errorOf(block('verified', 'autopath /etc/resolv.conf')).message).toMatch(
      /line 2.*only "@kubernetes" is supported/,
    );
  });

  it('routes a multicluster zone to the record-builder with the cluster zone', () => {
    const routes = routesOf(`.:53 {
      kubernetes cluster.local clusterset.local in-addr.arpa ip6.arpa {
        multicluster clusterset.local
      }
      forward . 192.0.2.53
    }`);
    expect(routes.routeFor(toFqdn('pg.data.svc.clusterset.local')).servers).toEqual([RB]);
    expect(routes.routeFor(toFqdn('web.shop.svc.cluster.local')).servers).toEqual([RB]);
  });

  it('gives a stub domain block and a subzone with its cache disabled routes of their own', () => {
    const routes = routesOf(
      `.:53 {
      kubernetes cluster.local {
        fallthrough
      }
      forward . 192.0.2.53
      cache 30 {
        disable denial slow.example.org
      }
    }
    consul.local:53 {
      forward . 10.0.0.1:8600 10.0.0.2:8600 {
        policy sequential
      }
    }`,
    );
    expect(routes.routeFor(toFqdn('web.service.consul.local')).servers).toEqual([
      { host: '10.0.0.1', port: 8600 },
      { host: '10.0.0.2', port: 8600 },
    ]);
    expect(routes.routeFor(toFqdn('web.service.consul.local')).policy).toBe('sequential');
    // fallthrough with no zones: the whole cluster zone falls through to the block's forward.
    expect(routes.routeFor(toFqdn('x.cluster.local')).fallsThrough).toBe(true);
    const slow = routes.routeFor(toFqdn('a.slow.example.org'));
    expect([slow.domain, slow.servers, slow.cache]).toMatchObject([
      'slow.example.org.',
      [{ host: '192.0.2.53', port: 53 }],
      { disable: { success: false, denial: true } },
    ]);
  });

  it('takes a block’s rewrite, hosts and loadbalance for the names it serves', () => {
    const p = plan(`.:53 {
      rewrite name exact a.example.org b.example.org
      hosts {
        192.0.2.80 www.example.org
        fallthrough
      }
      loadbalance
      forward . 192.0.2.53
    }`);
    expect(p.servers.map((b) => b.rewrite.length)).toEqual([1]);
    expect(p.hosts.map((h) => [h.zones, h.file, h.inline.length])).toEqual([[['.'], '/etc/hosts', 1]]);
    expect(p.loadbalance).toEqual(['.']);
  });

  it.each([
    [
      'two kubernetes plugins',
      'a.local {\n kubernetes\n}\nb.local {\n kubernetes\n}',
      5,
      'one kubernetes plugin per Corefile',
    ],
    [
      'serve_stale verify',
      '.:53 {\n forward . 1.1.1.1\n cache {\n  serve_stale 1h verify\n }\n}',
      3,
      'serve_stale verify',
    ],
  ])('refuses %s, naming the line', (_what, text, line, words) => {
    const error = errorOf(text);
    expect(error.line).toBe(line);
    expect(error.message).toContain(words);
  });

  it('sends an except name to the next forward that takes it, or to none (SERVFAIL, as CoreDNS)', () => {
    const p = plan(`.:53 {
      forward . 192.0.2.1 {
        except corp.example internal.example
      }
      forward corp.example 192.0.2.2
    }`);
    const route = (name: string) => p.rules.find((r) => r.domains.includes(toFqdn(name)));
    expect(route('corp.example')?.servers).toEqual([{ host: '192.0.2.2', port: 53 }]);
    expect(route('internal.example')).toMatchObject({ servers: [], unserved: true });
  });

  it('leaves a block of file or template only to them: what they leave is SERVFAIL, not sent upstream', () => {
    const p = plan(
      '.:53 {\n forward . 192.0.2.1\n}\nexample.org {\n template IN A {\n  answer "{{ .Name }} 60 IN A 192.0.2.9"\n }\n}',
    );
    expect(p.rules.find((r) => r.domains.includes(toFqdn('example.org')))).toMatchObject({ unserved: true });
  });

  it('keeps the NXDOMAIN of a fallthrough with no forward after it (nothing to fall to)', () => {
    const p = plan('cluster.local:53 {\n kubernetes {\n  fallthrough\n }\n}');
    expect(p.rules.find((r) => r.domains.includes(toFqdn('cluster.local')))).toMatchObject({ fallThrough: false });
  });

  it('binds every port the blocks name (vcluster’s 1053 beside a custom block’s 53)', () => {
    const p = plan('.:1053 {\n forward . 192.0.2.1\n}\nexample.org:53 {\n forward . 192.0.2.2\n}');
    expect([p.port, p.moreListeners]).toEqual([1053, [{ addresses: ['0.0.0.0'], port: 53 }]]);
  });
});
