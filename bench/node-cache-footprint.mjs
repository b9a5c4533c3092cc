// Bench case 11: the node cache's footprint by worker count, as the image ships it (its bundle,
// its heap flags, Node 22), the measure of the node-cache-on-big-nodes issue. For 1, 2, 4 and 8
// workers: RSS idle and with 10,000 answers, split into anonymous memory and file pages (the Node
// binary's ~51 MiB), and how often each name reached the upstream over a warm-up from 64 client
// ports (dnsperf's), read from the summed coredns_forward_requests_total: the workers share one
// cache, so a name is fetched once whichever workers its askers' ports hash to. And the default
// worker count under CPU quotas of 0.5, 1, 2 and 4 cores, in cgroups (v1 cpu) made here.
import { existsSync, mkdirSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort, loopbackNodeCacheArgs, node22Binary } from '@cluster-dns/testkit';
import { imageNodeOptions, startUpstream } from './cache-memory.mjs';
import {
  LOAD_CORE,
  ROOT,
  round,
  runDnsperf,
  SERVER_CORE,
  startOurs,
  statusMiB,
  tools,
  writeQueryFile,
} from './lib.mjs';
import { steadyMemory } from './scale.mjs';

export async function runNodeCacheFootprint({ row, note, count = 10_000, workerCounts = [1, 2, 4, 8] }) {
  const node22 = node22Binary();
  if ('unavailable' in node22 || !tools.dnsperf) {
    note(`Case 11 not run: ${'unavailable' in node22 ? node22.unavailable : 'dnsperf is not installed'}.`);
    return;
  }
  const names = Array.from({ length: count }, (_, i) => [`svc-${i}.bench.svc.cluster.local`, 'A']);
  // A TTL past the run: every upstream query counted is a miss, not a refresh.
  const upstream = await startUpstream(names, 3600);
  const caseName = `11. node cache footprint: ${count.toLocaleString('en-US')} answers, by workers (the image's bundle and heap flags, Node 22)`;
  try {
    for (const workers of workerCounts) {
      const port = await freePort();
      const metricsPort = await freePort();
      const corefile = `.:${port} {\n    bind 127.0.0.1\n    cache 3600 {\n        success ${count * 2}\n    }\n    forward . 127.0.0.1:${upstream.port}\n    prometheus 127.0.0.1:${metricsPort}\n}\n`;
      const cache = await startOurs(
        'forwarder',
        // Every dnsperf client shares 127.0.0.1: the per-client rate would refuse most of the warm-up.
        await loopbackNodeCacheArgs(corefile, [`-workers=${workers}`, '-client-qps=0']),
        SERVER_CORE,
        { NODE_OPTIONS: imageNodeOptions('node-cache') },
        join(ROOT, 'packages/forwarder/bundle/node-cache-main.js'),
        { node: node22.path },
      );
      try {
        const settled = async () => (await steadyMemory(cache.pid, undefined, 3)).steadyRssMiB;
        const idleRssMiB = await settled();
        const idle = { anon: statusMiB(cache.pid, 'RssAnon'), file: statusMiB(cache.pid, 'RssFile') };
        // 64 client sockets through every name 16 times: each name comes from many ports.
        runDnsperf({ port, file: writeQueryFile(names), seconds: 90, clients: 64, passes: 16 });
        const rssMiB = await settled();
        const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
        let forwarded = 0;
        for (const line of text.split('\n'))
          if (line.startsWith('coredns_forward_requests_total{')) forwarded += Number(line.split(' ').at(-1));
        row(caseName, `node cache, ${workers} worker${workers > 1 ? 's' : ''}`, {
          tool: 'dnsperf',
          idleRssMiB,
          idleAnonMiB: idle.anon,
          idleFileMiB: idle.file,
          rssMiB,
          anonMiB: statusMiB(cache.pid, 'RssAnon'),
          fileMiB: statusMiB(cache.pid, 'RssFile'),
          upstreamQueriesPerName: round(forwarded / count, 2),
        });
      } finally {
        await cache.stop();
      }
    }
  } finally {
    await upstream.stop();
  }
  await defaultWorkersUnderQuotas({ row, note, node: node22.path });
}

const CPU_CGROUP = '/sys/fs/cgroup/cpu';

/** The node cache's default -workers in a cgroup with each CPU quota, as its log states it. */
async function defaultWorkersUnderQuotas({ row, note, node, quotas = [0.5, 1, 2, 4] }) {
  if (process.getuid?.() !== 0 || !existsSync(`${CPU_CGROUP}/cpu.cfs_quota_us`)) {
    note('Case 11: the worker count under CPU quotas not measured: needs root and cgroup v1’s cpu controller.');
    return;
  }
  const caseName = '11. node cache default workers under a CPU quota (cgroup v1 cpu.cfs_quota_us)';
  for (const cores of quotas) {
    const group = join(CPU_CGROUP, `cdns-bench-${process.pid}-${cores * 10}`);
    mkdirSync(group);
    try {
      writeFileSync(join(group, 'cpu.cfs_period_us'), '100000');
      writeFileSync(join(group, 'cpu.cfs_quota_us'), String(Math.round(cores * 100000)));
      const port = await freePort();
      const corefile = `.:${port} {\n    bind 127.0.0.1\n    forward . 127.0.0.1:1\n    prometheus 127.0.0.1:${await freePort()}\n}\n`;
      const cache = await startOurs(
        'forwarder',
        await loopbackNodeCacheArgs(corefile),
        // Both cores: the affinity caps the count too, and pinned to one it would say 1 for every quota.
        `${SERVER_CORE},${LOAD_CORE}`,
        { NODE_OPTIONS: imageNodeOptions('node-cache') },
        join(ROOT, 'packages/forwarder/bundle/node-cache-main.js'),
        { node, cgroup: { procs: join(group, 'cgroup.procs') } },
      );
      try {
        const logged = cache.proc.logs.find((l) => l.msg === 'workers from the CPU given');
        row(caseName, `quota ${cores} cores`, {
          tool: 'log',
          quotaCores: logged?.quotaCores,
          affinity: logged?.affinity,
          workers: logged?.workers,
        });
      } finally {
        await cache.stop();
      }
    } finally {
      rmdirSync(group);
    }
  }
}
