import { copyFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  createNetns,
  hasCommand,
  type LaunchedProcess,
  launchProcess,
  linkNetns,
  type Netns,
  netnsUnavailable,
  waitFor,
} from '@cluster-dns/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dist } from './support/stack.js';

// A CoreDNS Pod's place taken from kubeadm's default Corefile alone (plus a kubeconfig standing for
// the service account): the record-builder and the forwarder both read the file unchanged, on the
// ports it names (53, 8080, 8181, 9153), in a network namespace of the test's own so those are
// free. `forward . /etc/resolv.conf` reads the namespace's resolv.conf, which names a test upstream
// on the "node" (a namespace linked to the Pod's), as a Pod's resolv.conf names the node's resolver.

const root = fileURLToPath(new URL('..', import.meta.url));
const NODE_IP = '192.0.2.1';
const OUTSIDE = {
  'www.example.org.': [{ type: 1, address: '192.0.2.80' }],
  '80.2.0.192.in-addr.arpa.': [{ type: 12, target: 'www.example.org.' }],
  // An address of the cluster's Service CIDR (manifests/demo's ServiceCIDR) the Internet answers
  // too: a leak would show this name (kubernetes/kubernetes#120585).
  '77.0.96.10.in-addr.arpa.': [{ type: 12, target: 'leaked.example.org.' }],
};

const unavailable = netnsUnavailable() ?? (hasCommand('dig') ? undefined : 'dig is not installed');
if (unavailable) console.warn(`skipping the CoreDNS Corefile test: ${unavailable}`);

describe.skipIf(unavailable)('a CoreDNS Pod replaced, from kubeadm’s default Corefile alone', () => {
  let pod: Netns;
  let node: Netns;
  const procs: LaunchedProcess[] = [];
  const get = async (url: string) => {
    const out = await pod.run(process.execPath, [
      '-e',
      `fetch(${JSON.stringify(url)}).then(async (r) => process.stdout.write(r.status + ' ' + (await r.text())))`,
    ]);
    const space = out.indexOf(' ');
    return { status: Number(out.slice(0, space)), body: out.slice(space + 1) };
  };
  const dig = async (...args: string[]) => (await pod.run('dig', ['+tries=1', '+time=3', ...args])).trim();

  beforeAll(async () => {
    pod = createNetns();
    node = createNetns();
    linkNetns(pod, '192.0.2.10/24', node, `${NODE_IP}/24`);
    pod.writeResolvConf(`nameserver ${NODE_IP}\n`);
    const dir = mkdtempSync(join(tmpdir(), 'coredns-corefile-'));
    const corefile = join(dir, 'Corefile');
    copyFileSync(`${root}/test/fixtures/kubeadm.Corefile`, corefile);
    const kubeconfig = join(dir, 'kubeconfig');
    procs.push(
      await launchProcess({
        prefix: pod.prefix,
        script: dist('testkit', 'cli.js'),
        args: [`--manifests=${root}/manifests/demo`, `--kubeconfig=${kubeconfig}`],
      }),
    );
    procs.push(
      await launchProcess({
        prefix: node.prefix,
        script: dist('testkit', 'upstream-cli.js'),
        args: [`--host=${NODE_IP}`, '--port=53', `--records=${JSON.stringify(OUTSIDE)}`],
      }),
    );
    // The overlay's args (manifests/overlays/coredns): the Corefile, and the record-builder on
    // loopback pushing its changes to the forwarder.
    procs.push(
      await launchProcess({
        prefix: pod.prefix,
        script: dist('record-builder'),
        args: [`--corefile=${corefile}`, '--dns-bind-address=127.0.0.1', '--notify=127.0.0.1:53'],
        env: { KUBECONFIG: kubeconfig },
      }),
    );
    procs.push(await launchProcess({ prefix: pod.prefix, script: dist('forwarder'), args: [`-conf`, corefile] }));
  }, 60_000);

  afterAll(async () => {
    for (const p of procs.reverse()) await p.stop('SIGKILL');
    pod?.close();
    node?.close();
  });

  it('answers cluster names on 53 over UDP and TCP, with the Corefile’s TTL', async () => {
    expect(await dig('@127.0.0.1', '+short', 'kubernetes.default.svc.cluster.local')).toBe('10.96.0.1');
    expect(await dig('@127.0.0.1', '+short', '+tcp', 'kubernetes.default.svc.cluster.local')).toBe('10.96.0.1');
    const answer = await dig('@127.0.0.1', '+noall', '+answer', 'kubernetes.default.svc.cluster.local');
    expect(answer.split(/\s+/).slice(0, 4)).toEqual(['kubernetes.default.svc.cluster.local.', '30', 'IN', 'A']);
  });

  it('answers outside names from resolv.conf’s nameserver, and reverse names it does not know by falling through (but a Service CIDR’s)', async () => {
    expect(await dig('@127.0.0.1', '+short', 'www.example.org')).toBe('192.0.2.80');
    expect(await dig('@127.0.0.1', '+short', '-x', '10.96.0.1')).toBe('kubernetes.default.svc.cluster.local.');
    // fallthrough in-addr.arpa: the cluster has no such address, the upstream does.
    expect(await dig('@127.0.0.1', '+short', '-x', '192.0.2.80')).toBe('www.example.org.');
    // Not for an unused address of a Service CIDR: that zone is the cluster's, its NXDOMAIN stands.
    expect(await dig('@127.0.0.1', '-x', '10.96.0.77')).toMatch(
      /status: NXDOMAIN[\s\S]*96\.10\.in-addr\.arpa\.\s+\d+\s+IN\s+SOA/,
    );
    // No fallthrough in the cluster zone: a name it does not have is NXDOMAIN, not asked outside.
    expect(await dig('@127.0.0.1', 'nothere.default.svc.cluster.local')).toContain('status: NXDOMAIN');
  });

  it('answers CoreDNS’s probes: /health on 8080, /ready on 8181, and metrics on 9153', async () => {
    expect(await get('http://127.0.0.1:8080/health')).toEqual({ status: 200, body: 'OK' });
    await waitFor(async () => (await get('http://127.0.0.1:8181/ready')).status === 200, {
      what: '/ready once the record-builder has synced',
    });
    expect((await get('http://127.0.0.1:8181/ready')).body).toBe('OK');
    expect((await get('http://127.0.0.1:9153/metrics')).body).toMatch(/^coredns_dns_requests_total\{/m);
  });
});
