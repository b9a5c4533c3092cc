// Bench case 1's headline: cache hits against the ceiling of Node itself (bench/ceiling.mjs: a bare
// dgram server replying a stored answer), dnsmasq, and, with --baseline=<a built older checkout>,
// that checkout's forwarder: each on the server core in turn, dnsperf on the load core, several
// short rounds interleaved, and each figure taken as its median across rounds of its ratio to the
// ceiling measured in the same round (these machines are shared: a neighbour's load moves every
// server of a round together, and leaves their ratio).
import { execFileSync, spawn } from 'node:child_process';
import { join } from 'node:path';
import { encodeMessage, QTYPE, queryDns } from '@cluster-dns/wire';
import { pinned, ROOT, round, runDnsperf, SERVER_CORE, startOurs, warm, withCpu, writeQueryFile } from './lib.mjs';

/** A --baseline checkout's row name: its commit. */
export function baselineName(dir) {
  try {
    return `baseline ${execFileSync('git', ['-C', dir, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim()}`;
  } catch {
    return `baseline ${dir}`;
  }
}

const median = (values) => {
  const sorted = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  return sorted.length ? sorted[Math.floor(sorted.length / 2)] : null;
};

/** The ceiling server, answering with `reply` (our forwarder's own answer, so the sizes match). */
async function startCeiling(reply) {
  const [command, argv] = pinned(SERVER_CORE, process.execPath, [
    join(ROOT, 'bench/ceiling.mjs'),
    reply.toString('hex'),
  ]);
  const child = spawn(command, argv, { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise((resolve, reject) => {
    child.stdout.once('data', (d) => resolve(JSON.parse(String(d)).port));
    child.once('exit', (code) => reject(new Error(`bench/ceiling.mjs exited with ${code}`)));
  });
  return { name: 'ceiling (bare dgram)', pid: child.pid, port, stop: async () => void child.kill('SIGTERM') };
}

/**
 * An older checkout's forwarder (its packages/forwarder/dist/main.js, built), with the flags it
 * knows: one that predates a flag is started again without the flags it refused.
 */
export async function startBaseline(dir, args) {
  const script = join(dir, 'packages/forwarder/dist/main.js');
  try {
    return await startOurs('forwarder', args, SERVER_CORE, {}, script);
  } catch {
    return startOurs(
      'forwarder',
      args.filter((a) => !a.startsWith('--metrics')),
      SERVER_CORE,
      {},
      script,
    );
  }
}

/**
 * Runs the interleaved rounds. `ours` and `dnsmasq` are running and warm ({ pid, port }); `names`
 * are the cached names; `fwArgs` start another forwarder like ours (for the baseline).
 */
export async function runHitCeiling({ row, ours, dnsmasq, names, fwArgs, baselines, seconds, rounds }) {
  const sample = encodeMessage(await queryDns({ host: '127.0.0.1', port: ours.port }, names[0][0], QTYPE.A));
  const ceiling = await startCeiling(sample);
  const servers = [ceiling, { name: 'cluster-dns', ...ours }];
  if (dnsmasq) servers.push({ name: 'dnsmasq', ...dnsmasq });
  const olds = [];
  for (const dir of baselines) {
    const old = await startBaseline(dir, fwArgs);
    olds.push(old);
    await warm(old.ready.port, names);
    servers.push({ name: baselineName(dir), pid: old.pid, port: old.ready.port });
  }
  const file = writeQueryFile(names);
  const perRound = new Map(servers.map((s) => [s.name, []]));
  for (let r = 0; r < rounds; r++) {
    const results = new Map();
    for (const s of servers)
      results.set(s.name, await withCpu(s.pid, () => runDnsperf({ port: s.port, file, seconds, clients: 4 })));
    const base = results.get(ceiling.name);
    for (const s of servers) {
      const x = results.get(s.name);
      perRound
        .get(s.name)
        .push({ ...x, qpsVsCeiling: x.qps / base.qps, cpuVsCeiling: x.cpuUsPerQuery / base.cpuUsPerQuery });
    }
  }
  const caseName = `1. cache hits vs the Node ceiling, UDP, max (median of ${rounds} interleaved rounds)`;
  const figures = {};
  for (const s of servers) {
    const list = perRound.get(s.name);
    figures[s.name] = {
      tool: 'dnsperf',
      qps: round(median(list.map((x) => x.qps)), 0),
      cpuUsPerQuery: round(median(list.map((x) => x.cpuUsPerQuery)), 1),
      qpsVsCeiling: round(median(list.map((x) => x.qpsVsCeiling)), 3),
      cpuVsCeiling: round(median(list.map((x) => x.cpuVsCeiling)), 3),
      rounds: list.length,
    };
    row(caseName, s.name, figures[s.name]);
  }
  await ceiling.stop();
  for (const old of olds) await old.stop();
  return figures;
}

/**
 * Forwarders without a cache, each answering every query with a miss to the same upstream, in
 * interleaved rounds as case 1's: a slow minute of the shared host weighs on them all alike.
 * `servers` are running ({ name, pid, port }); the first is ours. Rows carry medians, and each
 * other server's CPU per miss against ours, the median of per-round ratios.
 */
export async function runMissRounds({ row, servers, names, seconds, rounds }) {
  const file = writeQueryFile(names);
  const perRound = new Map(servers.map((s) => [s.name, []]));
  for (let r = 0; r < rounds; r++) {
    const results = new Map();
    for (const s of servers)
      results.set(s.name, await withCpu(s.pid, () => runDnsperf({ port: s.port, file, seconds })));
    const ours = results.get(servers[0].name);
    for (const s of servers) {
      const x = results.get(s.name);
      perRound.get(s.name).push({ ...x, cpuVsOurs: x.cpuUsPerQuery / ours.cpuUsPerQuery });
    }
  }
  const caseName = `3. forwarder misses → record-builder (median of ${rounds} interleaved rounds)`;
  for (const s of servers) {
    const list = perRound.get(s.name);
    row(caseName, s.name, {
      tool: 'dnsperf',
      qps: round(median(list.map((x) => x.qps)), 0),
      lost: round(median(list.map((x) => x.lost)), 0),
      cpuUsPerQuery: round(median(list.map((x) => x.cpuUsPerQuery)), 1),
      cpuVsOurs: round(median(list.map((x) => x.cpuVsOurs)), 3),
      rounds: list.length,
    });
  }
}
