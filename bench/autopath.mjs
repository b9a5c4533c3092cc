// Case 12: server-side search (autopath). Pods in network namespaces with the kubelet's
// resolv.conf (ndots:5, three cluster search domains) resolve through a node's namespace, five
// ways: the Pod's forwarder without autopath (today) and with it; a node cache in front of the
// forwarder without autopath (today behind node-local), carrying the pod to the forwarder with
// it, and walking itself. The flags of "with it" are those manifests/components/autopath renders
// (kubectl kustomize) for the Pod's forwarder and the node cache. For each: queries leaving the
// pod per lookup (an nft counter on its output) for glibc and musl, and the latency of a short
// name against its fully qualified form, for an outside name behind a 20 ms upstream and for
// `svc.other`, cold (each name's first lookup) and warm (the same names again).
// Also the memory the client map costs the record-builder at 150,000 pods.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  autopathArgs,
  createNetns,
  hasCommand,
  launchProcess,
  linkNetns,
  loopbackNodeCacheArgs,
  netnsUnavailable,
  runChecked,
  runCommand,
} from '@cluster-dns/testkit';
import { ROOT, round } from './lib.mjs';

const FORWARDER = join(ROOT, 'packages/forwarder/dist/main.js');
const NODE_CACHE = join(ROOT, 'packages/forwarder/dist/node-cache-main.js');
const UPSTREAM = join(ROOT, 'packages/testkit/dist/upstream-cli.js');

/** Each way a pod's queries go: its veth's subnet, the resolver its resolv.conf names. */
const WAYS = {
  'Pod forwarder, today': { net: 1, nameserver: '10.244.1.1' },
  'Pod forwarder, --autopath': { net: 2, nameserver: '10.244.2.1' },
  'node cache → forwarder, today': { net: 3, nameserver: '169.254.20.10' },
  'node cache carrying the pod → forwarder --autopath': { net: 4, nameserver: '169.254.20.11' },
  'node cache and forwarder, components/autopath': { net: 5, nameserver: '169.254.20.12' },
};
const podIp = (net) => `10.244.${net}.5`;
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
};

/** In a pod: looks each name up with the system resolver (glibc), one after another; ms each. */
const LOOKUPS = `
const dns = require('node:dns');
const names = JSON.parse(process.argv[1]);
(async () => {
  const out = [];
  for (const name of names) {
    const t = process.hrtime.bigint();
    await new Promise((r) => dns.lookup(name, { all: true }, () => r()));
    out.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  console.log(JSON.stringify(out));
})();`;

export async function runAutopath({ row, notes, quick }) {
  const why = netnsUnavailable() ?? (hasCommand('nft') ? undefined : 'nft is not installed');
  if (why) {
    notes.push(`Case 12 was not run: ${why}.`);
    return;
  }
  const lookups = quick ? 15 : 40;
  const names = 4 * lookups + 20;
  const node = createNetns();
  const pods = {};
  const procs = [];
  try {
    for (const [way, { net, nameserver }] of Object.entries(WAYS)) {
      const pod = createNetns();
      pods[way] = pod;
      linkNetns(node, `10.244.${net}.1/24`, pod, `${podIp(net)}/24`);
      await pod.run('ip', ['route', 'add', 'default', 'via', `10.244.${net}.1`]);
      pod.writeResolvConf(
        `nameserver ${nameserver}\nsearch testns.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n`,
      );
      for (const rule of [
        ['add', 'table', 'inet', 'dnscount'],
        ['add', 'chain', 'inet', 'dnscount', 'out', '{ type filter hook output priority 0; }'],
        ['add', 'rule', 'inet', 'dnscount', 'out', 'udp', 'dport', '53', 'counter'],
      ])
        await pod.run('nft', rule);
    }
    for (const a of ['169.254.20.10', '169.254.20.11', '169.254.20.12'])
      await node.run('ip', ['addr', 'add', `${a}/32`, 'dev', 'lo']);
    const dir = mkdtempSync(join(tmpdir(), 'bench-autopath-'));
    // The cluster's DNS: the client map for every pod, `s<i>.other` Services; NXDOMAIN otherwise.
    const cluster = {};
    for (const { net } of Object.values(WAYS))
      cluster[`10-244-${net}-5.client.dns.cluster.local.`] = [
        { type: 16, text: ['namespace=testns', 'search=default'] },
      ];
    const outside = {};
    for (let i = 0; i < names * Object.keys(WAYS).length; i++) {
      cluster[`s${i}.other.svc.cluster.local.`] = [{ type: 1, address: `10.96.${i >> 8}.${i & 255}`, ttl: 30 }];
      outside[`c${i}.example.com.`] = [{ type: 1, address: `192.0.${(i >> 8) & 255}.${i & 255}`, ttl: 300 }];
    }
    writeFileSync(join(dir, 'cluster.json'), JSON.stringify(cluster));
    writeFileSync(join(dir, 'outside.json'), JSON.stringify(outside));
    const upstream = (port, file, extra = []) =>
      launchProcess({
        prefix: node.prefix,
        script: UPSTREAM,
        args: ['--host=127.0.0.1', `--port=${port}`, `--records-file=${join(dir, file)}`, ...extra],
      });
    procs.push(await upstream(5301, 'cluster.json'), await upstream(5302, 'outside.json', ['--delay=20ms']));
    const forwarder = (addresses, extra) =>
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
          // kube-dns's manifest sets 1000; dnsmasq's default of 150 would evict before the warm pass.
          '--cache-size=10000',
          '--metrics-port=0',
          '--metrics-address=127.0.0.1',
          ...extra,
        ],
      });
    // What the component adds to each layer, the node cache trusted from loopback (its address here).
    const component = await autopathArgs('127.0.0.1/32');
    procs.push(await forwarder(['127.0.0.2', '10.244.1.1'], []));
    procs.push(await forwarder(['127.0.0.1', '10.244.2.1'], component.dnsmasq));
    const nodeCache = async (bind, to, extra) =>
      launchProcess({
        prefix: node.prefix,
        script: NODE_CACHE,
        readyMsg: 'node cache ready',
        env: { KUBE_DNS_SERVICE_HOST: to },
        args: await loopbackNodeCacheArgs(
          `cluster.local:53 {\n bind ${bind}\n cache 30\n forward . ${to}:53 {\n  force_tcp\n }\n}\n.:53 {\n bind ${bind}\n cache 30\n forward . ${to}:53\n}\n`,
          ['-workers=1', ...extra],
          { localIp: bind },
        ),
      });
    procs.push(await nodeCache('169.254.20.10', '127.0.0.2', []));
    procs.push(await nodeCache('169.254.20.11', '127.0.0.1', []));
    procs.push(await nodeCache('169.254.20.12', '127.0.0.1', component.nodeCache));
    let musl;
    if (hasCommand('musl-gcc')) {
      musl = join(dir, 'getaddrinfo');
      await runChecked('musl-gcc', ['-static', '-O2', '-o', musl, join(ROOT, 'test/clients/getaddrinfo.c')]);
    }

    const sent = async (pod) =>
      [...(await pod.run('nft', ['list', 'table', 'inet', 'dnscount'])).matchAll(/counter packets (\d+)/g)].reduce(
        (sum, m) => sum + Number(m[1]),
        0,
      );
    const counted = async (pod, command, args) => {
      const before = await sent(pod);
      const r = await runCommand('ip', ['netns', 'exec', pod.name, command, ...args]);
      if (r.status !== 0) throw new Error(`${command} ${args.join(' ')} in ${pod.name}: exit ${r.status} ${r.stderr}`);
      return (await sent(pod)) - before;
    };
    const timed = async (pod, list) =>
      JSON.parse(
        (await pod.run(process.execPath, ['-e', LOOKUPS, JSON.stringify(list)], { timeoutMs: 120_000 })).trim(),
      );

    let next = 0;
    for (const [way, pod] of Object.entries(pods)) {
      const fresh = () => next++;
      const glibc = await counted(pod, 'getent', ['ahosts', `c${fresh()}.example.com`]);
      const muslQueries = musl ? await counted(pod, musl, [`c${fresh()}.example.com`]) : null;
      const glibcShort = await counted(pod, 'getent', ['ahosts', `s${fresh()}.other`]);
      // Cold lookups, short and fully qualified interleaved, each name asked once.
      const outsideShort = [];
      const outsideFqdn = [];
      const clusterShort = [];
      const clusterFqdn = [];
      for (let i = 0; i < lookups; i++) {
        outsideShort.push(`c${fresh()}.example.com`);
        outsideFqdn.push(`c${fresh()}.example.com.`);
        clusterShort.push(`s${fresh()}.other`);
        clusterFqdn.push(`s${fresh()}.other.svc.cluster.local.`);
      }
      const order = outsideShort.flatMap((n, i) => [n, outsideFqdn[i], clusterShort[i], clusterFqdn[i]]);
      /** Each kind's median, the lookups interleaved by kind. */
      const medians = (ms, kinds = 4) =>
        Array.from({ length: kinds }, (_, k) => median(ms.filter((_, i) => i % kinds === k)));
      const [oS, oF, cS, cF] = medians(await timed(pod, order));
      // Warm: the same names again, in the same order, every answer cached (TTLs 30 s and more),
      // five times: the first pass runs code the cold pass barely ran (the kept walks' path); the
      // medians of the last three together are what a busy node cache runs.
      const [fwoS, fwoF] = medians(await timed(pod, order));
      await timed(pod, order);
      // A fifth kind in the settled passes: the short outside name's first step asked by its full
      // name. The same query as the short name's, so what the server does is the same; the
      // difference from the short name is the pod's resolver walking its search list.
      const withStep = outsideShort.flatMap((n, i) => [
        n,
        outsideFqdn[i],
        clusterShort[i],
        clusterFqdn[i],
        `${n}.testns.svc.cluster.local.`,
      ]);
      const settled = [];
      for (let pass = 0; pass < 3; pass++) settled.push(...(await timed(pod, withStep)));
      const [woS, woF, wcS, wcF, woStep] = medians(settled, 5);
      row(`12. autopath: ${way}`, 'cluster-dns', {
        glibcQueriesOutside: glibc,
        muslQueriesOutside: muslQueries,
        glibcQueriesSvcOther: glibcShort,
        outsideShortMs: round(oS, 2),
        outsideFqdnMs: round(oF, 2),
        outsideRatio: round(oS / oF, 3),
        svcOtherShortMs: round(cS, 2),
        svcOtherFqdnMs: round(cF, 2),
        svcOtherRatio: round(cS / cF, 3),
        firstWarmOutsideRatio: round(fwoS / fwoF, 3),
        warmOutsideShortMs: round(woS, 3),
        warmOutsideFqdnMs: round(woF, 3),
        warmOutsideRatio: round(woS / woF, 3),
        warmOutsideFirstStepMs: round(woStep, 3),
        warmOutsideFirstStepRatio: round(woStep / woF, 3),
        warmSvcOtherShortMs: round(wcS, 3),
        warmSvcOtherFqdnMs: round(wcF, 3),
        warmSvcOtherRatio: round(wcS / wcF, 3),
        lookups,
      });
    }
  } finally {
    for (const p of procs.reverse()) await p.stop('SIGKILL');
    for (const pod of Object.values(pods)) pod.close();
    node.close();
  }

  // The client map's memory in the record-builder: its state with 150,000 pods, heap after GC.
  const script = `
    const { ClusterState } = await import(${JSON.stringify(join(ROOT, 'packages/record-builder/dist/cluster-state.js'))});
    const measure = () => { gc(); gc(); return process.memoryUsage().heapUsed; };
    const s = new ClusterState({ zone: 'cluster.local.', reverseZones: ['in-addr.arpa.'], ttlSeconds: 30 }, undefined, Date.now);
    const before = measure();
    for (let i = 0; i < 150000; i++)
      s.upsertPod({ namespace: 'ns-' + (i % 500), name: 'app-' + i + '-abcde', ips: ['10.' + ((i >> 16) & 255) + '.' + ((i >> 8) & 255) + '.' + (i & 255)], searchDefault: i % 10 !== 0 });
    const heapMiB = Math.round((measure() - before) / 104857.6) / 10;
    // Read after the measure, so the state is alive through it.
    console.log(JSON.stringify({ pods: 150000, heapMiB, known: s.clientAt('10.0.1.5') !== undefined }));`;
  const out = await runChecked(process.execPath, ['--expose-gc', '--input-type=module', '-e', script]);
  row('12. autopath: the record-builder’s pods and client map', 'cluster-dns', JSON.parse(out.trim()));
  notes.push(
    'Case 12: pods in network namespaces with the kubelet’s resolv.conf, through a node namespace; the “with autopath” ways run the flags manifests/components/autopath renders for the Pod’s forwarder and the node cache; queries counted by nft on each pod’s output; cold lookups are Node’s dns.lookup (glibc) of names never asked before, a short name and a fully qualified one interleaved, medians, and warm ones the same names asked again (firstWarm: the first pass again; warm: the third to fifth together; warmOutsideFirstStep: the short name’s first step asked by its full name, the same query, without the pod’s search-list walk); the outside upstream answers after 20 ms, the cluster stand-in at once. The record-builder row is its pod state (pod records and client map) with 150,000 pods, heap after GC.',
  );
}
