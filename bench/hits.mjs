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
async function startCeiling(reply, plain = false) {
  const [command, argv] = pinned(SERVER_CORE, process.execPath, [
    join(ROOT, 'bench/ceiling.mjs'),
    reply.toString('hex'),
    ...(plain ? ['plain'] : []),
  ]);
  const child = spawn(command, argv, { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise((resolve, reject) => {
    child.stdout.once('data', (d) => resolve(JSON.parse(String(d)).port));
    child.once('exit', (code) => reject(new Error(`bench/ceiling.mjs exited with ${code}`)));
  });
  const name = plain ? 'plain dgram ceiling' : 'ceiling (bare dgram)';
  return { name, pid: child.pid, port, stop: async () => void child.kill('SIGTERM') };
}

/**
 * An older checkout's forwarder (its packages/forwarder/dist/main.js, built), with the flags it
 * knows: one that predates a flag is started again without each flag it refused.
 */
export async function startBaseline(dir, args) {
  const script = join(dir, 'packages/forwarder/dist/main.js');
  let left = args;
  for (let attempt = 0; ; attempt++) {
    try {
      return await startOurs('forwarder', left, SERVER_CORE, {}, script);
    } catch (error) {
      const refused = /unknown flag:? (-{1,2}[\w-]+)/.exec(String(error))?.[1];
      if (attempt > 20) throw error;
      // The oldest checkouts named no flag: they predate --metrics-port.
      left = refused ? left.filter((a) => a.split('=')[0] !== refused) : left.filter((a) => !a.startsWith('--metrics'));
    }
  }
}

/**
 * Runs the interleaved rounds. `ours` and `dnsmasq` are running and warm ({ pid, port }); `names`
 * are the cached names; `fwArgs` start another forwarder like ours (for the baseline).
 */
export async function runHitCeiling({ row, ours, dnsmasq, names, fwArgs, baselines, seconds, rounds }) {
  const sample = encodeMessage(await queryDns({ host: '127.0.0.1', port: ours.port }, names[0][0], QTYPE.A));
  const ceiling = await startCeiling(sample);
  const plainCeiling = await startCeiling(sample, true);
  const servers = [ceiling, plainCeiling, { name: 'cluster-dns', ...ours }];
  if (dnsmasq) servers.push({ name: 'dnsmasq', ...dnsmasq });
  const olds = [];
  for (const dir of baselines) {
    const old = await startBaseline(dir, fwArgs);
    olds.push(old);
    await warm(old.ready.port, names);
    servers.push({ name: baselineName(dir), pid: old.pid, port: old.ready.port });
  }
  const medians = await interleavedRounds({ servers, names, seconds, rounds, clients: 4 });
  const caseName = `1. cache hits vs the Node ceiling, UDP, max (median of ${rounds} interleaved rounds)`;
  const figures = {};
  for (const s of servers) {
    const m = medians.get(s.name);
    figures[s.name] = {
      tool: 'dnsperf',
      qps: m.qps,
      cpuUsPerQuery: m.cpuUsPerQuery,
      qpsVsCeiling: m.qpsVsFirst,
      cpuVsCeiling: m.cpuVsFirst,
      rounds: m.rounds,
    };
    row(caseName, s.name, figures[s.name]);
  }
  await ceiling.stop();
  await plainCeiling.stop();
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
  const medians = await interleavedRounds({ servers, names, seconds, rounds });
  const caseName = `3. forwarder misses → record-builder (median of ${rounds} interleaved rounds)`;
  for (const s of servers) {
    const m = medians.get(s.name);
    row(caseName, s.name, {
      tool: 'dnsperf',
      qps: m.qps,
      lost: m.lost,
      cpuUsPerQuery: m.cpuUsPerQuery,
      cpuVsOurs: m.cpuVsFirst,
      rounds: m.rounds,
    });
  }
}

/**
 * `rounds` rounds of dnsperf against each of `servers` ({ name, pid, port }) in turn, the same
 * names each time, `clients` at once (dnsperf's default when undefined). Each round's QPS and CPU
 * per query of every server are taken against the first server's in that round, so a slow minute
 * of the shared host weighs on all of them alike. Returns, by server name, the medians over the
 * rounds: qps, lost, cpuUsPerQuery, qpsVsFirst, cpuVsFirst, and the number of rounds.
 */
async function interleavedRounds({ servers, names, seconds, rounds, clients }) {
  const file = writeQueryFile(names);
  const perRound = new Map(servers.map((s) => [s.name, []]));
  for (let r = 0; r < rounds; r++) {
    const results = new Map();
    for (const s of servers)
      results.set(s.name, await withCpu(s.pid, () => runDnsperf({ port: s.port, file, seconds, clients })));
    const first = results.get(servers[0].name);
    for (const s of servers) {
      const x = results.get(s.name);
      perRound
        .get(s.name)
        .push({ ...x, qpsVsFirst: x.qps / first.qps, cpuVsFirst: x.cpuUsPerQuery / first.cpuUsPerQuery });
    }
  }
  const medians = new Map();
  for (const [name, list] of perRound) {
    const med = (field) => median(list.map((x) => x[field]));
    medians.set(name, {
      qps: round(med('qps'), 0),
      lost: round(med('lost'), 0),
      cpuUsPerQuery: round(med('cpuUsPerQuery'), 1),
      qpsVsFirst: round(med('qpsVsFirst'), 3),
      cpuVsFirst: round(med('cpuVsFirst'), 3),
      rounds: list.length,
    });
  }
  return medians;
}
