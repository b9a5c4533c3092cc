import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  createNetns,
  hasCommand,
  type LaunchedProcess,
  launchProcess,
  type Netns,
  netnsUnavailable,
  waitFor,
} from '@cluster-dns/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dist } from './support/stack.js';

// kube-dns's own Deployment with only its images swapped for ours: each container's args and env
// exactly as upstream's kube-dns.yaml writes them (cluster/addons/dns/kube-dns/kube-dns.yaml.base,
// __DNS__DOMAIN__ filled with cluster.local), on the ports they bind there, in a network namespace
// of the test's own so those ports are free. The one addition: KUBECONFIG, standing for the
// service account a Pod reaches the API with.

const root = fileURLToPath(new URL('..', import.meta.url));

/** The kubedns container: its args and env. */
const KUBEDNS = {
  args: ['--domain=cluster.local.', '--dns-port=10053', '--config-dir=/kube-dns-config', '--v=2'],
  env: { PROMETHEUS_PORT: '10055' },
};
/** The dnsmasq container's args: dnsmasq-nanny's flags, `--`, dnsmasq's. Older releases add -logtostderr. */
const DNSMASQ = [
  '-v=2',
  '-logtostderr',
  '-configDir=/etc/k8s/dns/dnsmasq-nanny',
  '-restartDnsmasq=true',
  '--',
  '-k',
  '--cache-size=1000',
  '--no-negcache',
  '--dns-loop-detect',
  '--log-facility=-',
  '--server=/cluster.local/127.0.0.1#10053',
  '--server=/in-addr.arpa/127.0.0.1#10053',
  '--server=/ip6.arpa/127.0.0.1#10053',
];
/** The sidecar container's args. */
const SIDECAR = [
  '--v=2',
  '--probe=kubedns,127.0.0.1:10053,kubernetes.default.svc.cluster.local,5,SRV',
  '--probe=dnsmasq,127.0.0.1:53,kubernetes.default.svc.cluster.local,5,SRV',
];

const unavailable = netnsUnavailable();
if (unavailable) console.warn(`skipping the kube-dns image-swap test: ${unavailable}`);
if (!hasCommand('dig')) console.warn('skipping the kube-dns image-swap test: dig is not installed');

describe.skipIf(unavailable || !hasCommand('dig'))('kube-dns.yaml with its images swapped for ours', () => {
  let pod: Netns;
  const procs: LaunchedProcess[] = [];
  /** An HTTP GET from inside the Pod's namespace: status and body. */
  const get = async (url: string) => {
    const out = await pod.run(process.execPath, [
      '-e',
      `fetch(${JSON.stringify(url)}).then(async (r) => process.stdout.write(r.status + ' ' + (await r.text())))`,
    ]);
    const space = out.indexOf(' ');
    return { status: Number(out.slice(0, space)), body: out.slice(space + 1) };
  };
  const dig = async (...args: string[]) => (await pod.run('dig', ['+short', '+tries=1', '+time=3', ...args])).trim();

  beforeAll(async () => {
    pod = createNetns();
    const kubeconfig = join(mkdtempSync(join(tmpdir(), 'kube-dns-swap-')), 'kubeconfig');
    procs.push(
      await launchProcess({
        prefix: pod.prefix,
        script: dist('testkit', 'cli.js'),
        args: [`--manifests=${root}/manifests/demo`, `--kubeconfig=${kubeconfig}`],
      }),
    );
    procs.push(
      await launchProcess({
        prefix: pod.prefix,
        script: dist('record-builder'),
        args: KUBEDNS.args,
        env: { ...KUBEDNS.env, KUBECONFIG: kubeconfig },
      }),
    );
    procs.push(await launchProcess({ prefix: pod.prefix, script: dist('forwarder'), args: DNSMASQ }));
    procs.push(await launchProcess({ prefix: pod.prefix, script: dist('sidecar'), args: SIDECAR }));
  }, 60_000);

  afterAll(async () => {
    for (const p of procs.reverse()) await p.stop('SIGKILL');
    pod?.close();
  });

  it('answers on port 53 over UDP and TCP, and the record-builder on 10053', async () => {
    expect(await dig('@127.0.0.1', 'kubernetes.default.svc.cluster.local')).toBe('10.96.0.1');
    expect(await dig('@127.0.0.1', '+tcp', 'kubernetes.default.svc.cluster.local')).toBe('10.96.0.1');
    expect(await dig('@127.0.0.1', '-p', '10053', 'kubernetes.default.svc.cluster.local')).toBe('10.96.0.1');
    expect(await dig('@127.0.0.1', '-x', '10.96.0.1')).toBe('kubernetes.default.svc.cluster.local.');
  });

  it('answers the probes kube-dns.yaml declares: readiness on 8081, health checks and metrics on 10054', async () => {
    expect((await get('http://127.0.0.1:8081/readiness')).status).toBe(200);
    // The sidecar's first probes run within their 5 s interval.
    for (const label of ['kubedns', 'dnsmasq']) {
      let last = { status: 0, body: '' };
      await waitFor(
        async () => {
          last = await get(`http://127.0.0.1:10054/healthcheck/${label}`);
          return last.status === 200 && JSON.parse(last.body).IsOk === true;
        },
        { what: `the sidecar's ${label} health check`, seen: () => last, timeoutMs: 20_000 },
      );
    }
    expect((await get('http://127.0.0.1:10054/metrics')).body).toContain('kubedns_probe_kubedns_latency_ms');
  });

  it('serves the record-builder’s metrics on PROMETHEUS_PORT (10055) and the forwarder’s on 9153', async () => {
    const skydns = await get('http://127.0.0.1:10055/metrics');
    expect(skydns.status).toBe(200);
    expect(skydns.body).toContain('skydns_skydns_dns_request_count_total');
    const forwarder = await get('http://127.0.0.1:9153/metrics');
    expect(forwarder.body).toMatch(/^coredns_dns_requests_total\{/m);
  });
});
