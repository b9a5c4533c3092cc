import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { CorefileError, EMPTY_KUBE_DNS_CONFIG, parseKubeDnsConfig, readCorefile } from '@cluster-dns/runtime';
import { toFqdn } from '@cluster-dns/wire';
import { loadAllYaml } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { renderCorefile, serviceHostVariable } from './corefile-template.js';
import { planNodeLocal } from './node-local-plan.js';

const root = fileURLToPath(new URL('../../../..', import.meta.url));
/** The Corefile of the ConfigMap operators apply: never a hand copy. */
const manifestCorefile = () => {
  const docs = loadAllYaml(readFileSync(`${root}/manifests/node-local/configmap.yaml`, 'utf8')) as Array<{
    data: { Corefile: string };
  }>;
  return (docs[0] as { data: { Corefile: string } }).data.Corefile;
};

const values = {
  localIps: ['169.254.20.10', '10.96.0.10'],
  port: 53,
  clusterDns: '10.96.0.11',
  kubeDns: EMPTY_KUBE_DNS_CONFIG,
  resolvFile: '/etc/resolv.conf',
};

const planOf = (text: string) => planNodeLocal(readCorefile(text, { mode: 'node-local' }));
const errorOf = (text: string): CorefileError => {
  try {
    planOf(text);
  } catch (error) {
    if (error instanceof CorefileError) return error;
    throw error;
  }
  throw new Error('no error');
};

describe('node-local mode’s Corefile', () => {
  it('runs nodelocaldns.yaml’s Corefile: every zone to the cluster DNS over TCP, the rest to resolv.conf', () => {
    const plan = planOf(renderCorefile(manifestCorefile(), values));
    expect(plan.listenAddresses).toEqual(['169.254.20.10', '10.96.0.10']);
    expect(plan.port).toBe(53);
    expect(plan.rules.map((r) => [r.domains, r.servers, r.forceTcp, r.fallThrough])).toEqual([
      [[toFqdn('cluster.local')], [{ host: '10.96.0.11', port: 53 }], true, false],
      [[toFqdn('in-addr.arpa')], [{ host: '10.96.0.11', port: 53 }], true, false],
      [[toFqdn('ip6.arpa')], [{ host: '10.96.0.11', port: 53 }], true, false],
    ]);
    // success 9984 30 / denial 9984 5 in the cluster zone; `cache 30` caps both kinds elsewhere.
    expect(plan.rules[0]?.cache).toEqual({
      negativeCache: true,
      maxCacheTtlSeconds: 30,
      negTtlSeconds: 5,
      minCacheTtlSeconds: 5,
    });
    expect(plan.rules[1]?.cache).toMatchObject({ maxCacheTtlSeconds: 30, negTtlSeconds: 30 });
    expect(plan.root?.servers).toEqual({ resolvFile: '/etc/resolv.conf' });
    expect(plan.root?.forceTcp).toBe(false);
    expect(plan.cacheSize).toBe(2 * 9984);
    expect(plan.metrics).toEqual({ host: '0.0.0.0', port: 9253 });
    expect(plan.health).toEqual({ host: '169.254.20.10', port: 8080 });
    expect(plan.loopDetect).toBe(true);
    expect(plan.reloadMs).toBe(30_000);
  });

  it('fills the placeholders as node-cache does, stub domains and custom upstreams included', () => {
    const kubeDns = parseKubeDnsConfig(
      new Map([
        ['stubDomains', '{"acme.local": ["1.2.3.4"], "corp.example": ["10.150.0.1:5353", "10.150.0.2"]}'],
        ['upstreamNameservers', '["8.8.8.8", "8.8.4.4"]'],
      ]),
    );
    const base = manifestCorefile().replace(
      'forward . __PILLAR__UPSTREAM__SERVERS__',
      // nodelocaldns.yaml once asked upstreams over TCP; custom upstreams are asked over UDP.
      'forward . __PILLAR__UPSTREAM__SERVERS__ {\n  force_tcp\n  }',
    );
    const text = renderCorefile(base, { ...values, kubeDns });
    expect(text).not.toContain('__PILLAR__');
    const plan = planOf(text);
    expect(plan.root?.servers).toEqual([
      { host: '8.8.8.8', port: 53 },
      { host: '8.8.4.4', port: 53 },
    ]);
    expect(plan.root?.forceTcp).toBe(false);
    const stub = (name: string) => plan.rules.find((r) => r.domains[0] === toFqdn(name));
    expect(stub('acme.local')?.servers).toEqual([{ host: '1.2.3.4', port: 53 }]);
    expect(stub('corp.example')?.servers).toEqual([
      { host: '10.150.0.1', port: 5353 },
      { host: '10.150.0.2', port: 53 },
    ]);
    expect(stub('corp.example')?.cache).toMatchObject({ maxCacheTtlSeconds: 30 });
    expect(stub('corp.example')?.forceTcp).toBe(false);
  });

  it('names the kubelet’s variable for the upstream Service', () => {
    expect(serviceHostVariable('kube-dns-upstream')).toBe('KUBE_DNS_UPSTREAM_SERVICE_HOST');
  });

  it('leaves __PILLAR__CLUSTER__DNS__ in place when the Service’s variable is unset, for the caller to refuse', () => {
    expect(renderCorefile(manifestCorefile(), { ...values, clusterDns: undefined })).toContain(
      '__PILLAR__CLUSTER__DNS__',
    );
  });

  it('reads what a Corefile may also say: comments, quotes, keys over two lines, a block on one line', () => {
    const plan = planOf(
      [
        '# a comment',
        'example.org:1053,',
        '  dns://example.net:1053 {',
        '  bind 127.0.0.1 # trailing comment',
        '  forward . "192.0.2.1:53" { prefer_udp }',
        '  cache { success 100 60 1 }',
        '  log',
        '  health { lameduck 3s }',
        '}',
      ].join('\n'),
    );
    expect(plan.rules.map((r) => r.domains[0])).toEqual([toFqdn('example.org'), toFqdn('example.net')]);
    expect(plan.port).toBe(1053);
    expect(plan.rules[0]?.servers).toEqual([{ host: '192.0.2.1', port: 53 }]);
    expect(plan.rules[0]?.cache).toMatchObject({ maxCacheTtlSeconds: 60, minCacheTtlSeconds: 1 });
    expect(plan.cacheSize).toBe(100 + 9984);
    // `log` is the log stage's, per block, not the process's --log-queries.
    expect(plan.logQueries).toBe(false);
    expect(plan.servers.some((b) => b.log)).toBe(true);
    expect(plan.lameduckMs).toBe(3000);
  });

  it('does not cache a block without `cache`', () => {
    const plan = planOf('example.org { forward . 192.0.2.1 }');
    expect(plan.rules[0]?.cache).toBe('off');
    expect(plan.cacheSize).toBe(0);
  });

  it.each([
    [
      'a plugin outside the subset',
      '.:53 {\n  forward . 1.1.1.1\n  kubernetes cluster.local\n}',
      3,
      'kubernetes: not supported in node-local mode',
    ],
    ['an unclosed block', '.:53 {\n  forward . 1.1.1.1\n', 1, 'not closed'],
    ['an import of a file that is not there', '.:53 {\n  import /nonexistent/common\n}', 2, 'import: cannot read'],
    ['a bind to an interface name', '.:53 {\n bind eth0\n forward . 1.1.1.1\n}', 2, 'not an IP address'],
    [
      'a forward option CoreDNS does not have',
      '.:53 {\n forward . 1.1.1.1 {\n  spray\n }\n}',
      3,
      '"spray" is not supported',
    ],
    [
      'a cache option CoreDNS does not have',
      '.:53 {\n forward . 1.1.1.1\n cache {\n  stale 5s\n }\n}',
      4,
      '"stale" is not supported',
    ],
    ['a zone given twice', 'a.org {\n forward . 1.1.1.1\n}\na.org {\n forward . 1.1.1.1\n}', 4, 'two server blocks'],
    ['a block with no forward', 'a.org {\n cache 30\n}', 1, 'has no forward'],
    ['a forward to a name', 'a.org {\n forward . dns.google\n}', 2, 'upstreams are IP addresses here'],
    [
      'a resolv.conf outside the root block',
      'a.org {\n forward . /etc/resolv.conf\n}',
      2,
      'only supported in the "." block',
    ],
    ['a negative capacity', 'a.org {\n forward . 1.1.1.1\n cache {\n  success -1\n }\n}', 4, 'CAPACITY'],
    ['nothing at all', '# only a comment\n', 1, 'no server block'],
  ])('refuses %s, naming the line', (_what, text, line, words) => {
    const error = errorOf(text);
    expect(error.line).toBe(line);
    expect(error.message).toContain(`line ${line}`);
    expect(error.message).toContain(words);
    expect(error.code).toBe('COREFILE_INVALID');
  });
});
