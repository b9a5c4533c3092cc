import { readFileSync } from 'node:fs';
import { toFqdn } from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import { CorefileError } from './parse.js';
import { readCorefile } from './server-blocks.js';

/**
 * kubeadm's default Corefile (kubernetes/kubernetes cmd/kubeadm/app/phases/addons/dns), as clusters
 * run it; the e2e test starts the Pod from the same file.
 */
const KUBEADM_COREFILE = readFileSync(new URL('../../../../test/fixtures/kubeadm.Corefile', import.meta.url), 'utf8');

const pod = (text: string) => readCorefile(text, { mode: 'pod' });
const one = (body: string) => pod(`.:53 {\n${body}\n}`)[0] as ReturnType<typeof pod>[number];
const errorOf = (text: string, mode: 'pod' | 'node-local' = 'pod'): CorefileError => {
  try {
    readCorefile(text, { mode });
  } catch (error) {
    if (error instanceof CorefileError) return error;
    throw error;
  }
  throw new Error('no error');
};

describe('readCorefile: the one Corefile reader', () => {
  it('reads kubeadm’s default Corefile, every plugin set up', () => {
    const [block] = pod(KUBEADM_COREFILE);
    expect(block?.keys).toEqual([{ zone: '.', port: 53 }]);
    expect(block?.health).toEqual({ address: { host: '0.0.0.0', port: 8080 }, lameduckMs: 5000 });
    expect(block?.ready).toEqual({ host: '0.0.0.0', port: 8181 });
    expect(block?.prometheus).toEqual({ host: '0.0.0.0', port: 9153 });
    expect(block?.kubernetes).toMatchObject({
      zones: ['cluster.local.', 'in-addr.arpa.', 'ip6.arpa.'],
      pods: 'insecure',
      ttlSeconds: 30,
      fallthrough: ['in-addr.arpa.', 'ip6.arpa.'],
      namespaces: undefined,
      ignoreEmptyService: false,
      endpointPodNames: false,
    });
    expect(block?.forward).toMatchObject({
      from: '.',
      to: { resolvFile: '/etc/resolv.conf' },
      maxConcurrent: 1000,
      policy: 'random',
    });
    expect(block?.cache).toMatchObject({
      success: { capacity: 9984, maxTtlSeconds: 30, minTtlSeconds: 5 },
      denial: { capacity: 9984, maxTtlSeconds: 30, minTtlSeconds: 5 },
      disable: { success: ['cluster.local.'], denial: ['cluster.local.'] },
    });
    expect([block?.errors, block?.loop, block?.loadbalance, block?.reloadMs]).toEqual([true, true, true, 30_000]);
  });

  it('reads the kubernetes options operators use', () => {
    const k = one(`kubernetes cluster.local clusterset.local {
      namespaces default shop
      ignore empty_service
      endpoint_pod_names
      fallthrough
      ttl 0
      pods verified
      kubeconfig /etc/kube/config ctx
      multicluster clusterset.local
    }`).kubernetes;
    expect(k).toMatchObject({
      namespaces: ['default', 'shop'],
      ignoreEmptyService: true,
      endpointPodNames: true,
      fallthrough: [],
      ttlSeconds: 0,
      pods: 'verified',
      kubeconfig: { file: '/etc/kube/config', context: 'ctx' },
      multicluster: ['clusterset.local.'],
    });
    // No zones: the block's.
    expect(one('kubernetes').kubernetes?.zones).toBeUndefined();
  });

  it('reads cache, forward, hosts and rewrite with their options', () => {
    const b = one(`cache 300 example.org {
        success 5000 600 10
        denial 2000 60
        prefetch 5 10m 20%
        serve_stale 2h verify
      }
      forward . 192.0.2.1 [2001:db8::1]:5353 {
        policy round_robin
        force_tcp
        except corp.example
      }
      hosts /etc/extra-hosts example.org {
        192.0.2.80 www.example.org web
        ttl 60
        no_reverse
        reload 0
        fallthrough
      }
      rewrite name exact old.example.org new.default.svc.cluster.local
      rewrite continue name suffix .example.org .svc.cluster.local answer auto
      rewrite stop name regex (.*)-v1\\.example\\.org {1}.default.svc.cluster.local answer name (.*)\\.default\\.svc\\.cluster\\.local {1}-v1.example.org
      rewrite type ANY HINFO`);
    expect(b.cache).toMatchObject({
      zones: ['example.org.'],
      success: { capacity: 5000, maxTtlSeconds: 600, minTtlSeconds: 10 },
      denial: { capacity: 2000, maxTtlSeconds: 60, minTtlSeconds: 5 },
      prefetch: { amount: 5, durationMs: 600_000, percentage: 20 },
      serveStale: { durationMs: 7_200_000, verify: true },
    });
    expect(b.forward).toMatchObject({
      to: [
        { host: '192.0.2.1', port: 53 },
        { host: '2001:db8::1', port: 5353 },
      ],
      policy: 'round_robin',
      forceTcp: true,
      except: ['corp.example.'],
    });
    expect(b.hosts).toMatchObject({
      file: '/etc/extra-hosts',
      zones: ['example.org.'],
      inline: [{ address: '192.0.2.80', names: ['www.example.org.', 'web.'] }],
      ttlSeconds: 60,
      noReverse: true,
      reloadMs: 0,
      fallthrough: [],
    });
    expect(b.rewrite.map((r) => (r.field === 'name' ? [r.match, r.from, r.to, r.answerAuto, r.stop] : r))).toEqual([
      ['exact', 'old.example.org.', 'new.default.svc.cluster.local.', true, true],
      ['suffix', '.example.org.', '.svc.cluster.local.', true, false],
      ['regex', '(.*)-v1\\.example\\.org', '{1}.default.svc.cluster.local.', false, true],
      { field: 'type', from: 255, to: 13, stop: true, line: 23 },
    ]);
    const regex = b.rewrite[2];
    expect(regex?.field === 'name' && regex.answerName?.to).toBe('{1}-v1.example.org.');
  });

  it('reads the block form of a rewrite with its answer rule', () => {
    const [rule] = one(`rewrite stop {
      name regex (.*)-(us-west-1)\\.example\\.org {1}.service.{2}.consul
      answer name (.*)\\.service\\.(us-west-1)\\.consul {1}-{2}.example.org
    }`).rewrite;
    expect(rule?.field === 'name' && [rule.match, rule.answerName?.from.source]).toEqual([
      'regex',
      '(.*)\\.service\\.(us-west-1)\\.consul',
    ]);
  });

  it('reads several server blocks, their keys and ports', () => {
    const blocks = pod(
      '.:1053 {\n forward . 192.0.2.1\n}\nconsul.local:1053 dns://corp.example:1053 {\n forward . 10.0.0.9\n}',
    );
    expect(blocks.map((b) => b.keys)).toEqual([
      [{ zone: '.', port: 1053 }],
      [
        { zone: toFqdn('consul.local'), port: 1053 },
        { zone: toFqdn('corp.example'), port: 1053 },
      ],
    ]);
  });

  it.each([
    [
      'a plugin we do not run',
      '.:53 {\n  errors\n  dnssec\n}',
      3,
      'dnssec: not supported here: answers are not signed',
    ],
    [
      'a plugin CoreDNS does not have',
      '.:53 {\n  errors\n  ocp_dnsnameresolver\n}',
      3,
      "unknown directive 'ocp_dnsnameresolver'",
    ],
    [
      'a kubernetes option we do not have',
      '.:53 {\n kubernetes cluster.local {\n  noendpoints\n }\n}',
      3,
      'kubernetes noendpoints: "noendpoints" is not supported here',
    ],
    [
      'a bad pods mode',
      '.:53 {\n kubernetes cluster.local {\n  pods everything\n }\n}',
      3,
      'kubernetes pods: the pods mode must be',
    ],
    ['a TTL out of range', '.:53 {\n kubernetes {\n  ttl 4000\n }\n}', 3, 'TTL must be an integer from 0 to 3600'],
    [
      'a cache option CoreDNS does not have',
      '.:53 {\n cache {\n  stale 5s\n }\n}',
      3,
      'cache stale: "stale" is not supported',
    ],
    [
      'a forward policy we do not know',
      '.:53 {\n forward . 1.1.1.1 {\n  policy fastest\n }\n}',
      3,
      'forward policy: the policy must be',
    ],
    [
      'a rewrite field we do not have',
      '.:53 {\n rewrite cname exact a.example.org b.example.org\n}',
      2,
      'rewrite: cname rules are not supported',
    ],
    ['a forward to DNS over HTTPS', '.:53 {\n forward . https://192.0.2.1\n}', 2, "'https' is not supported"],
    [
      'a template construct we do not run',
      '.:53 {\n template IN A {\n  answer "{{ range .Match }}x{{ end }}"\n }\n}',
      3,
      '{{range}} is not supported',
    ],
    [
      'a rewrite regex that does not compile',
      '.:53 {\n rewrite name regex (.*))) x\n}',
      2,
      'is not a regular expression',
    ],
    ['a hosts option we do not have', '.:53 {\n hosts {\n  wildcard\n }\n}', 3, 'hosts wildcard'],
    ['a reload faster than 2 s', '.:53 {\n reload 1s\n}', 2, 'reload: INTERVAL must be 2s or more'],
    [
      'kubernetes twice',
      '.:53 {\n kubernetes a.local\n kubernetes b.local\n}',
      3,
      'plugin/kubernetes: this plugin can only be used once per Server Block (first at Corefile:2)',
    ],
  ])('refuses %s, naming the line and the plugin', (_what, text, line, words) => {
    const error = errorOf(text);
    expect(error.line).toBe(line);
    expect(error.message).toContain(`line ${line}`);
    expect(error.message).toContain(words);
  });

  it('takes in node-local mode all but the cluster’s own plugins', () => {
    expect(errorOf(KUBEADM_COREFILE, 'node-local').message).toContain(
      'line 6: ready: not supported in node-local mode',
    );
    expect(
      readCorefile('.:53 {\n forward . 1.1.1.1\n rewrite name a.org b.org\n}', { mode: 'node-local' })[0]?.rewrite,
    ).toHaveLength(1);
  });
});
