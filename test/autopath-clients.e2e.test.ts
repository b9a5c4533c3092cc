import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  createNetns,
  hasCommand,
  type LaunchedProcess,
  launchProcess,
  linkNetns,
  loopbackNodeCacheArgs,
  type Netns,
  netnsUnavailable,
  runChecked,
  runCommand,
} from '@cluster-dns/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// Real clients in pods' network namespaces, with the kubelet's resolv.conf (ndots:5, the three
// cluster search domains), asking through a node's network namespace: the Pod's forwarder with
// --autopath directly, a node cache carrying the pod to it, a node cache walking itself with
// -autopath, and a Pod's forwarder without autopath (today's count). Queries leaving each pod are
// counted by an nft counter on the pod's own output, as a packet capture on its veth would.
// The cluster's DNS behind is a stand-in serving the record-builder's client map for the pods
// (the record-builder's own map is tested through the real processes in autopath.e2e.test.ts).

const root = fileURLToPath(new URL('..', import.meta.url));
const FORWARDER = `${root}/packages/forwarder/dist/main.js`;
const NODE_CACHE = `${root}/packages/forwarder/dist/node-cache-main.js`;
const UPSTREAM = `${root}/packages/testkit/dist/upstream-cli.js`;
const unavailable = netnsUnavailable() ?? (hasCommand('nft') ? undefined : 'nft is not installed');
const tools = { musl: hasCommand('musl-gcc'), busybox: hasCommand('busybox'), dig: hasCommand('dig') };
if (unavailable) console.warn(`skipping the autopath real-client tests: ${unavailable} (.ci/run runs them as root)`);

const OUTSIDE = 'api.example.com';
/** The pods, each behind its own veth to the node: its address, and the resolver address it is given. */
const PODS = {
  direct: { ip: '10.244.1.5', node: '10.244.1.1', nameserver: '10.244.1.1' },
  carried: { ip: '10.244.2.6', node: '10.244.2.1', nameserver: '169.254.20.10' },
  nodeWalk: { ip: '10.244.4.8', node: '10.244.4.1', nameserver: '169.254.20.11' },
  today: { ip: '10.244.3.7', node: '10.244.3.1', nameserver: '10.244.3.1' },
} as const;
type PodName = keyof typeof PODS;

const KUBELET_RESOLV = (nameserver: string) =>
  `nameserver ${nameserver}\nsearch testns.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5 timeout:2 attempts:2\n`;

const dashed = (ip: string) => ip.replace(/\./g, '-');
/** The cluster's DNS as autopath reads it: the client map for the pods, one Service, NXDOMAIN otherwise. */
const CLUSTER_RECORDS = {
  ...Object.fromEntries(
    Object.values(PODS).map((p) => [
      `${dashed(p.ip)}.client.dns.cluster.local.`,
      [{ type: 16, text: ['namespace=testns', 'search=default'] }],
    ]),
  ),
  'web.shop.svc.cluster.local.': [{ type: 1, address: '10.96.1.10', ttl: 30 }],
  'db.shop.svc.cluster.local.': [{ type: 1, address: '10.96.1.11', ttl: 30 }],
};
const OUTSIDE_RECORDS = { [`${OUTSIDE}.`]: [{ type: 1, address: '192.0.2.10', ttl: 300 }] };

/** Where the walking node cache's and the Pod forwarder's metrics are served, in the node's namespace. */
const NODE_WALK_METRICS = '127.0.0.1:9254';
const FORWARDER_METRICS_PORT = 9161;

const nodeCacheCorefile = (bind: string, metrics?: string) => `cluster.local:53 {
    bind ${bind}
    cache 30${metrics ? `\n    prometheus ${metrics}` : ''}
    forward . 127.0.0.1:53 {
        force_tcp
    }
}
.:53 {
    bind ${bind}
    cache 30
    forward . 127.0.0.1:53
}
`;

describe.skipIf(unavailable)('autopath with real clients in pods, kubelet’s resolv.conf', () => {
  let node: Netns;
  const pods = {} as Record<PodName, Netns>;
  const procs: LaunchedProcess[] = [];
  let musl = '';

  /** Runs a client in a pod; its exit code and output, whatever the code. */
  const inPod = async (pod: PodName, command: string, args: string[]) => {
    const r = await runCommand('ip', ['netns', 'exec', pods[pod].name, command, ...args]);
    return { code: r.status, out: r.stdout };
  };
  /** Queries this pod has sent to port 53 so far (UDP datagrams and TCP connections). */
  const sent = async (pod: PodName) => {
    const text = await pods[pod].run('nft', ['list', 'table', 'inet', 'dnscount']);
    return [...text.matchAll(/counter packets (\d+)/g)].reduce((sum, m) => sum + Number(m[1]), 0);
  };
  /** A lookup by a client in a pod: what it printed, its exit code, and how many queries left the pod. */
  const lookup = async (pod: PodName, command: string, args: string[]) => {
    const before = await sent(pod);
    const r = await inPod(pod, command, args);
    return { ...r, queries: (await sent(pod)) - before };
  };

  beforeAll(async () => {
    node = createNetns();
    for (const [name, p] of Object.entries(PODS) as [PodName, (typeof PODS)[PodName]][]) {
      const pod = createNetns();
      pods[name] = pod;
      linkNetns(node, `${p.node}/24`, pod, `${p.ip}/24`);
      await pod.run('ip', ['route', 'add', 'default', 'via', p.node]);
      pod.writeResolvConf(KUBELET_RESOLV(p.nameserver));
      for (const rule of [
        ['add', 'table', 'inet', 'dnscount'],
        ['add', 'chain', 'inet', 'dnscount', 'out', '{ type filter hook output priority 0; }'],
        ['add', 'rule', 'inet', 'dnscount', 'out', 'udp', 'dport', '53', 'counter'],
        ['add', 'rule', 'inet', 'dnscount', 'out', 'tcp', 'dport', '53', 'tcp', 'flags', 'syn', 'counter'],
      ])
        await pod.run('nft', rule);
    }
    for (const address of ['169.254.20.10/32', '169.254.20.11/32'])
      await node.run('ip', ['addr', 'add', address, 'dev', 'lo']);
    const upstream = (port: number, records: object) =>
      launchProcess({
        prefix: node.prefix,
        script: UPSTREAM,
        args: ['--host=127.0.0.1', `--port=${port}`, `--records=${JSON.stringify(records)}`],
      });
    procs.push(await upstream(5301, CLUSTER_RECORDS), await upstream(5302, OUTSIDE_RECORDS));
    const forwarder = (addresses: string[], extra: string[], metricsPort = 0) =>
      launchProcess({
        prefix: node.prefix,
        script: FORWARDER,
        args: [
          '-k',
          '--no-resolv',
          ...addresses.map((a) => `--listen-address=${a}`),
          '--port=53',
          '--server=/cluster.local/127.0.0.1#5301',
          '--server=127.0.0.1#5302',
          '--lameduck=0s',
          `--metrics-port=${metricsPort}`,
          '--metrics-address=127.0.0.1',
          ...extra,
        ],
      });
    // The Pod's forwarder with autopath, trusting the node caches (on the node: 127.0.0.1).
    procs.push(
      await forwarder(
        ['127.0.0.1', PODS.direct.node, PODS.carried.node, PODS.nodeWalk.node],
        ['--autopath=cluster.local', '--trust-client-address-from=127.0.0.1/32'],
        FORWARDER_METRICS_PORT,
      ),
    );
    procs.push(await forwarder([PODS.today.node], []));
    const nodeCache = async (bind: string, extra: string[], metrics?: string) =>
      launchProcess({
        prefix: node.prefix,
        script: NODE_CACHE,
        readyMsg: 'node cache ready',
        env: { KUBE_DNS_SERVICE_HOST: '127.0.0.1' },
        args: await loopbackNodeCacheArgs(nodeCacheCorefile(bind, metrics), ['-workers=1', ...extra], {
          localIp: bind,
        }),
      });
    // One node cache carries the pod to the Pod's forwarder; the other walks itself.
    procs.push(await nodeCache('169.254.20.10', []));
    procs.push(await nodeCache('169.254.20.11', ['-autopath=cluster.local'], NODE_WALK_METRICS));
    if (tools.musl) {
      musl = join(mkdtempSync(join(tmpdir(), 'musl-')), 'getaddrinfo');
      await runChecked('musl-gcc', ['-static', '-O2', '-o', musl, `${root}/test/clients/getaddrinfo.c`]);
    }
  }, 60_000);

  afterAll(async () => {
    for (const p of procs.reverse()) await p.stop('SIGKILL');
    for (const pod of Object.values(pods)) pod.close();
    node?.close();
  });

  const addressesOf = (out: string) => [...new Set([...out.matchAll(/^(\d+\.\d+\.\d+\.\d+)\s/gm)].map((m) => m[1]))];

  it.each(['direct', 'carried', 'nodeWalk'] as const)(
    'glibc getent ahosts: an outside name in two queries (A and AAAA) where it took eight (%s)',
    async (pod) => {
      const today = await lookup('today', 'getent', ['ahosts', OUTSIDE]);
      expect([today.code, addressesOf(today.out), today.queries]).toEqual([0, ['192.0.2.10'], 8]);
      const walked = await lookup(pod, 'getent', ['ahosts', OUTSIDE]);
      expect([walked.code, addressesOf(walked.out), walked.queries]).toEqual([0, ['192.0.2.10'], 2]);
    },
  );

  it.each(['direct', 'carried', 'nodeWalk'] as const)(
    'glibc getent: a short name in another namespace (web.shop) in two queries where it took four; NXDOMAIN as before (%s)',
    async (pod) => {
      const today = await lookup('today', 'getent', ['ahosts', 'web.shop']);
      expect([today.code, addressesOf(today.out), today.queries]).toEqual([0, ['10.96.1.10'], 4]);
      const walked = await lookup(pod, 'getent', ['ahosts', 'web.shop']);
      expect([walked.code, addressesOf(walked.out), walked.queries]).toEqual([0, ['10.96.1.10'], 2]);
      // A name nowhere: exit 2 (not found) both ways, the pod walking on after the first step.
      expect((await lookup('today', 'getent', ['ahosts', 'nothing.example.com'])).code).toBe(2);
      expect((await lookup(pod, 'getent', ['ahosts', 'nothing.example.com'])).code).toBe(2);
    },
  );

  it('a node cache that walks, in front of a Pod forwarder that walks too: walked once, on the node, and warm from the walk kept there', async () => {
    /** clusterdns_forwarder_autopath_total by result, read in the node's namespace. */
    const autopathCounts = async (address: string) => {
      const script = `fetch('http://${address}/metrics').then((r) => r.text()).then((t) => console.log(t))`;
      const text = await node.run(process.execPath, ['-e', script]);
      return Object.fromEntries(
        [...text.matchAll(/^clusterdns_forwarder_autopath_total\{result="(\w+)"\} (\d+)/gm)].map((m) => [
          m[1],
          Number(m[2]),
        ]),
      );
    };
    const pod = `127.0.0.1:${FORWARDER_METRICS_PORT}`;
    const name = 'db.shop'; // asked by no other test
    const podBefore = await autopathCounts(pod);
    const nodeBefore = await autopathCounts(NODE_WALK_METRICS);
    const cold = await lookup('nodeWalk', 'getent', ['ahosts', name]);
    expect([cold.code, addressesOf(cold.out), cold.queries]).toEqual([0, ['10.96.1.11'], 2]);
    const warm = await lookup('nodeWalk', 'getent', ['ahosts', name]);
    expect([warm.code, addressesOf(warm.out), warm.queries]).toEqual([0, ['10.96.1.11'], 2]);
    const podAfter = await autopathCounts(pod);
    const nodeAfter = await autopathCounts(NODE_WALK_METRICS);
    // The Pod's forwarder saw the node cache's steps as the node cache's own: nothing walked there.
    expect(podAfter.walked).toBe(podBefore.walked);
    // The node cache walked A and AAAA twice each, the second time from the walks it kept.
    expect((nodeAfter.walked ?? 0) - (nodeBefore.walked ?? 0)).toBe(4);
    expect((nodeAfter.kept ?? 0) - (nodeBefore.kept ?? 0)).toBe(2);
  });

  it.skipIf(!tools.musl)('musl getaddrinfo (A only): one query where it took four', async () => {
    const today = await lookup('today', musl, [OUTSIDE]);
    expect([today.code, today.out.trim(), today.queries]).toEqual([0, '192.0.2.10', 4]);
    for (const pod of ['direct', 'carried', 'nodeWalk'] as const) {
      const walked = await lookup(pod, musl, [OUTSIDE]);
      expect([pod, walked.code, walked.out.trim(), walked.queries]).toEqual([pod, 0, '192.0.2.10', 1]);
    }
    expect((await lookup('direct', musl, ['nothing.example.com'])).code).toBe(1);
  });

  it('Node’s dns.lookup (the system resolver): two queries where it took eight', async () => {
    const script = `require('dns').lookup('${OUTSIDE}', { all: true }, (e, a) => { if (e) { console.log(e.code); process.exit(2); } console.log(a.map((x) => x.address).join(',')); })`;
    const today = await lookup('today', process.execPath, ['-e', script]);
    expect([today.code, today.out.trim(), today.queries]).toEqual([0, '192.0.2.10', 8]);
    const walked = await lookup('carried', process.execPath, ['-e', script]);
    expect([walked.code, walked.out.trim(), walked.queries]).toEqual([0, '192.0.2.10', 2]);
  });

  it.skipIf(!tools.dig)('dig +search: the CNAME and the address for the first step it asks', async () => {
    const walked = await lookup('direct', 'dig', ['+search', '+noall', '+answer', OUTSIDE, 'A']);
    expect(walked.out).toMatch(
      /^api\.example\.com\.testns\.svc\.cluster\.local\.\s+\d+\s+IN\s+CNAME\s+api\.example\.com\.$/m,
    );
    expect(walked.out).toMatch(/^api\.example\.com\.\s+\d+\s+IN\s+A\s+192\.0\.2\.10$/m);
    expect(walked.queries).toBe(1);
    expect((await lookup('today', 'dig', ['+search', '+noall', '+answer', OUTSIDE, 'A'])).queries).toBe(4);
  });

  it.skipIf(!tools.busybox)('busybox nslookup gets the address through the walk', async () => {
    const r = await lookup('carried', 'busybox', ['nslookup', '-type=a', OUTSIDE]);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/Address: 192\.0\.2\.10/);
  });
});
