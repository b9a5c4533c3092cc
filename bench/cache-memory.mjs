// Bench case 8: what cached answers cost in memory, ours beside dnsmasq's with the same cache size,
// as the kernel sees it (RSS, no GC asked). The node-local issue's target: a node cache holding
// 10,000 answers in ≤ 60 MiB. Each server fills its cache from one upstream (testkit's, on the load
// core), then answers hits over every name for a TTL and more, so each entry is refreshed once
// among hits, as in a cache that runs for a while.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { launchProcess, node22Binary } from '@cluster-dns/testkit';
import {
  LOAD_CORE,
  ROOT,
  round,
  runDnsperf,
  SCRATCH,
  SERVER_CORE,
  startDnsmasq,
  startOurs,
  statusMiB,
  tools,
  warm,
  writeQueryFile,
} from './lib.mjs';
import { manifestNodeOptions, steadyMemory } from './scale.mjs';

/** The NODE_OPTIONS an image of docker/Dockerfile sets for `target`. */
export function imageNodeOptions(target) {
  const dockerfile = readFileSync(join(ROOT, 'docker/Dockerfile'), 'utf8');
  const stage = dockerfile.split(/^FROM /m).find((s) => new RegExp(`AS ${target}\\n`).test(s));
  const value = stage && /^ENV NODE_OPTIONS="([^"]+)"/m.exec(stage)?.[1];
  if (!value) throw new Error(`docker/Dockerfile: no NODE_OPTIONS in the ${target} stage`);
  return value;
}

/** testkit's upstream with `count` A records of `ttlSeconds`, pinned to the load core. */
export async function startUpstream(names, ttlSeconds) {
  const records = {};
  names.forEach(([name], i) => {
    records[`${name}.`] = [{ type: 1, address: `10.${i >> 16}.${(i >> 8) & 255}.${i & 255}`, ttl: ttlSeconds }];
  });
  const file = join(SCRATCH, `records-${names.length}.json`);
  writeFileSync(file, JSON.stringify(records));
  const upstream = await launchProcess({
    script: join(ROOT, 'packages/testkit/dist/upstream-cli.js'),
    args: [`--records-file=${file}`],
    prefix: tools.taskset ? ['taskset', '-c', String(LOAD_CORE)] : [],
  });
  return { port: Number(upstream.ready.port), stop: () => upstream.stop() };
}

/** Idle, after caching every name, and after hits through one refresh of each. */
async function measure(pid, port, names, ttlSeconds) {
  // Each the median of 3 s of samples: one GC's moment does not make the figure.
  const settled = async () => (await steadyMemory(pid, undefined, 3)).steadyRssMiB;
  const idleRssMiB = await settled();
  await warm(port, names);
  const cachedRssMiB = await settled();
  runDnsperf({ port, file: writeQueryFile(names), seconds: ttlSeconds + 10, clients: 4 });
  const afterHitsRssMiB = await settled();
  // RSS split as the kernel counts it: anonymous memory (heaps), and file pages mapped in (for
  // Node, most of the ~40 MiB are its binary's code, clean pages the kernel can drop and read again).
  return {
    anonMiB: statusMiB(pid, 'RssAnon'),
    fileMiB: statusMiB(pid, 'RssFile'),
    idleRssMiB,
    cachedRssMiB,
    rssMiB: afterHitsRssMiB,
    kibPerEntry: round(((afterHitsRssMiB - idleRssMiB) * 1024) / names.length, 2),
  };
}

/**
 * Runs case 8 with `count` names under cluster.local. `forwarderArgs(server, extra)` gives our
 * forwarder's flags (run.mjs's); ours runs as it ships, the bundle with the manifest's heap flags.
 */
export async function runCacheMemory({ row, forwarderArgs, count = 10_000, ttlSeconds = 30 }) {
  const names = Array.from({ length: count }, (_, i) => [`svc-${i}.bench.svc.cluster.local`, 'A']);
  const upstream = await startUpstream(names, ttlSeconds);
  const route = `/cluster.local/127.0.0.1#${upstream.port}`;
  const caseName = `8. cache memory: ${count.toLocaleString('en-US')} cached answers, RSS (no GC asked)`;
  // As each ships, on the images' Node 22: the kube-dns Pod's forwarder with the manifest's heap
  // flags, and the node-cache image's (V8's young generation capped: a miss costs more CPU there,
  // where a node cache answers mostly hits; see bench/README.md, case 8).
  const node22 = node22Binary();
  const node = 'unavailable' in node22 ? process.execPath : node22.path;
  const variants = [
    ['cluster-dns, the Pod forwarder', manifestNodeOptions('dnsmasq')],
    ['cluster-dns, the node-cache image', imageNodeOptions('node-cache')],
  ];
  try {
    for (const [name, nodeOptions] of variants) {
      const ours = await startOurs(
        'forwarder',
        forwarderArgs(route, [`--cache-size=${count}`]),
        SERVER_CORE,
        { NODE_OPTIONS: nodeOptions },
        join(ROOT, 'packages/forwarder/bundle/main.js'),
        { node },
      );
      try {
        row(caseName, name, { tool: 'dnsperf', ...(await measure(ours.pid, ours.ready.port, names, ttlSeconds)) });
      } finally {
        await ours.stop();
      }
    }
    if (tools.dnsmasq) {
      const port = 17353 + (process.pid % 1000);
      const dm = await startDnsmasq(port, [`--cache-size=${count}`, `--server=${route}`]);
      try {
        row(caseName, 'dnsmasq', { tool: 'dnsperf', ...(await measure(dm.pid, port, names, ttlSeconds)) });
      } finally {
        await dm.stop();
      }
    }
  } finally {
    await upstream.stop();
  }
}
