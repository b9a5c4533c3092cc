// `pnpm bench`: throughput, latency, scale, memory and propagation, with dnsmasq measured in the
// same run where it is installed. Writes bench/results/<date>.json and .md and prints the table.
//   pnpm bench [-- --seconds=10] [--quick] [--cases=1,2,3,4,5,6,7,8,9,10,11,12,13,14] [--rounds=5] [--baseline=<dir>[,<dir>]]
// --baseline: built older checkouts (git clone, checkout, install, tsc -b) whose forwarders run
// beside ours, interleaved in the same rounds (cases 1 and 3), and under the same attacks (case
// 10): "no regression" and "before" are measured, not remembered.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { join } from 'node:path';
import { fixtures, startApiServer } from '@cluster-dns/testkit';
import { runAutopath } from './autopath.mjs';
import { runCacheMemory } from './cache-memory.mjs';
import { writeCharts } from './charts.mjs';
import { runPortEntropy } from './entropy.mjs';
import { runFanout } from './fanout.mjs';
import { baselineName, runHitCeiling, runMissRounds, startBaseline } from './hits.mjs';
import { isolationSummary, runIsolation } from './isolation.mjs';
import {
  LOAD_CORE,
  LOCAL_FORWARDER,
  machine,
  ROOT,
  recordBuilderArgs,
  repin,
  round,
  runDnsperf,
  runLoadgen,
  SCRATCH,
  SERVER_CORE,
  startDnsmasq,
  startOurs,
  tools,
  warm,
  withCpu,
  withSelfOn,
  writeQueryFile,
} from './lib.mjs';
import { runListing } from './listing.mjs';
import { runNodeCacheFootprint } from './node-cache-footprint.mjs';
import { runPropagation } from './push.mjs';
import { runRollout } from './rollout.mjs';
import { runScale, runSizing } from './scale.mjs';
import { writeSizing } from './sizing.mjs';
import { runWorkers } from './workers.mjs';

const argv = process.argv.slice(2);
const quick = argv.includes('--quick');
const seconds = Number(argv.find((a) => a.startsWith('--seconds='))?.split('=')[1] ?? (quick ? 3 : 10));
const only = argv
  .find((a) => a.startsWith('--cases='))
  ?.split('=')[1]
  ?.split(',')
  .map(Number);
const want = (n) => !only || only.includes(n);
const rounds = Number(argv.find((a) => a.startsWith('--rounds='))?.split('=')[1] ?? (quick ? 3 : 5));
const baselines = (argv.find((a) => a.startsWith('--baseline='))?.split('=')[1] ?? '').split(',').filter(Boolean);
const ms = seconds * 1000;
const rows = [];
const notes = [];
const row = (caseName, server, r, extra = {}) => {
  rows.push({ case: caseName, server, ...r, ...extra });
  console.log(JSON.stringify({ case: caseName, server, ...r, ...extra }));
};

if (!tools.dnsperf)
  notes.push(
    'dnsperf not installed: max QPS comes from bench/loadgen.mjs, which may be the bottleneck (apt-get install dnsperf).',
  );
if (!tools.dnsmasq) notes.push('dnsmasq not installed: no side-by-side reference (apt-get install dnsmasq).');
if (!tools.taskset) notes.push('taskset not found: processes are not pinned to cores.');
if (!tools.nsd) notes.push('nsd not installed: the record-builder is compared with the 25k QPS floor instead.');

/** testkit's API server holding `objects`, and the record-builder on it, on free loopback ports. */
async function startCluster(objects, { apiOptions = {}, core = SERVER_CORE, env = {}, rbArgs = [] } = {}) {
  const api = await startApiServer({ objects, ...apiOptions });
  const kubeconfig = join(await mkdtemp(join(SCRATCH, 'bench-')), 'kubeconfig');
  await api.writeKubeconfig(kubeconfig);
  const rb = await startOurs('record-builder', recordBuilderArgs(kubeconfig, rbArgs), core, env);
  const stop = async () => {
    await rb.stop();
    await api.close();
  };
  return { api, rb, stop };
}

/**
 * The forwarder's flags with one `--server` route (`/cluster.local/ip#port` or `ip#port`), plus
 * `extra`. The per-client limits are set where the load never reaches them: it comes from one
 * address and stands for a cluster's many pods (case 10 is where one client is one pod), while the
 * door still does its work on every query, as it does in production.
 */
const UNREACHED = 10_000_000;
const forwarderArgs = (server, extra) => [
  ...LOCAL_FORWARDER,
  `--client-qps=${UNREACHED}`,
  `--client-burst=${UNREACHED}`,
  `--client-tcp-qps=${UNREACHED}`,
  `--client-tcp-burst=${UNREACHED}`,
  `--server=${server}`,
  ...extra,
];
const toRecordBuilder = (rbPort) => `/cluster.local/127.0.0.1#${rbPort}`;
/**
 * A --baseline checkout's forwarder, no cache, to `server`; with `extra` flags where that build has
 * them (a build from before a flag would refuse it), so both sides of a comparison run alike.
 */
const startBaselineForwarder = (dir, server, extra = []) => {
  const known = readFileSync(join(dir, 'packages/forwarder/dist/options.js'), 'utf8');
  const flags = extra.filter((f) => known.includes(`'${f.replace(/^--/, '').split('=')[0]}'`));
  return startBaseline(dir, forwarderArgs(server, ['--cache-size=0', ...flags]));
};

const maxQps = async (pid, port, names, mode = 'udp') => {
  if (tools.dnsperf) return withCpu(pid, () => runDnsperf({ port, file: writeQueryFile(names), seconds, mode }));
  return withCpu(pid, () => runLoadgen({ port, names, transport: mode, durationMs: ms, window: 200 }));
};
const fixedRate = (pid, port, names, rate) => withCpu(pid, () => runLoadgen({ port, names, durationMs: ms, rate }));
const tcpMax = (pid, port, names) =>
  withCpu(pid, () => runLoadgen({ port, names, transport: 'tcp', durationMs: ms, connections: 8, window: 16 }));

// ---- cases 1–4: a 1,000-service cluster, the record-builder, the forwarder, dnsmasq
if ([1, 2, 3, 4].some(want)) {
  const services = Array.from({ length: 1000 }, (_, i) =>
    fixtures.service('bench', `svc-${i}`, {
      clusterIPs: [`10.97.${i >> 8}.${i & 255}`],
      ports: [{ name: 'http', port: 80 }],
    }),
  );
  const names = services.map((s) => [`${s.metadata.name}.bench.svc.cluster.local`, 'A']);
  // The record-builder is not what cases 1–2 measure: it stays off the server core until case 4.
  const cluster = await startCluster(services, { core: LOAD_CORE });
  const { rb } = cluster;
  const rbPort = rb.ready.dnsPort;

  if (want(1) || want(2)) {
    const fw = await startOurs('forwarder', forwarderArgs(toRecordBuilder(rbPort), ['--cache-size=10000']));
    await warm(fw.ready.port, names);
    let dm;
    if (tools.dnsmasq) {
      dm = await startDnsmasq(15353 + (process.pid % 1000), [
        '--cache-size=10000',
        `--server=/cluster.local/127.0.0.1#${rbPort}`,
      ]);
      dm.port = 15353 + (process.pid % 1000);
      await warm(dm.port, names);
    }
    if (want(1)) {
      await runHitCeiling({
        row,
        ours: { pid: fw.pid, port: fw.ready.port },
        dnsmasq: dm && { pid: dm.pid, port: dm.port },
        names,
        fwArgs: forwarderArgs(toRecordBuilder(rbPort), ['--cache-size=10000']),
        baselines,
        seconds: quick ? 2 : 3,
        rounds,
      });
      row('1. forwarder cache hits, UDP, max', 'cluster-dns', await maxQps(fw.pid, fw.ready.port, names));
      if (dm) row('1. forwarder cache hits, UDP, max', 'dnsmasq', await maxQps(dm.pid, dm.port, names));
      row(
        '1. forwarder cache hits, UDP, 10k QPS',
        'cluster-dns',
        await fixedRate(fw.pid, fw.ready.port, names, 10_000),
      );
      if (dm) row('1. forwarder cache hits, UDP, 10k QPS', 'dnsmasq', await fixedRate(dm.pid, dm.port, names, 10_000));
    }
    if (want(2)) {
      row('2. forwarder cache hits, TCP pipelined, max', 'cluster-dns', await tcpMax(fw.pid, fw.ready.port, names));
      if (dm) row('2. forwarder cache hits, TCP pipelined, max', 'dnsmasq', await tcpMax(dm.pid, dm.port, names));
    }
    await fw.stop();
    if (want(3) && dm) {
      const fw0 = await startOurs('forwarder', forwarderArgs(`127.0.0.1#${dm.port}`, ['--cache-size=0']));
      row(
        '3. forwarder misses → dnsmasq (cached) upstream',
        'cluster-dns',
        await maxQps(fw0.pid, fw0.ready.port, names),
      );
      await fw0.stop();
    }
    await dm?.stop();
  }
  if (want(3)) {
    const fw0 = await startOurs('forwarder', forwarderArgs(toRecordBuilder(rbPort), ['--cache-size=0']));
    if (tools.dnsperf) {
      // The cost of a miss beside older checkouts', on the same upstream, in the same rounds.
      const olds = [];
      for (const dir of baselines) olds.push([dir, await startBaselineForwarder(dir, toRecordBuilder(rbPort))]);
      await runMissRounds({
        row,
        servers: [
          { name: 'cluster-dns', pid: fw0.pid, port: fw0.ready.port },
          ...olds.map(([dir, old]) => ({ name: baselineName(dir), pid: old.pid, port: old.ready.port })),
        ],
        names,
        seconds: quick ? 2 : 3,
        rounds,
      });
      for (const [, old] of olds) await old.stop();
    } else row('3. forwarder misses → record-builder', 'cluster-dns', await maxQps(fw0.pid, fw0.ready.port, names));
    await fw0.stop();
    const entropyServers = [
      {
        name: 'cluster-dns',
        start: async (upstream) => {
          // The test upstream stands for a server off the host: a socket per query, as those get.
          const f = await startOurs(
            'forwarder',
            forwarderArgs(upstream, ['--cache-size=0', '--kept-loopback-sockets=false']),
          );
          return { pid: f.pid, port: f.ready.port, stop: f.stop };
        },
      },
    ];
    if (tools.dnsmasq)
      entropyServers.push({
        name: 'dnsmasq',
        start: async (upstream) => {
          const port = 16353 + (process.pid % 1000);
          const d = await startDnsmasq(port, ['--cache-size=0', `--server=${upstream}`]);
          return { pid: d.pid, port, stop: d.stop };
        },
      });
    for (const dir of baselines)
      entropyServers.push({
        name: baselineName(dir),
        start: async (upstream) => {
          const f = await startBaselineForwarder(dir, upstream, ['--kept-loopback-sockets=false']);
          return { pid: f.pid, port: f.ready.port, stop: f.stop };
        },
      });
    await runPortEntropy({ row, servers: entropyServers });
  }
  if (want(4)) {
    repin(rb.pid, SERVER_CORE);
    row('4. record-builder direct, UDP, max', 'cluster-dns', await maxQps(rb.pid, rbPort, names));
    row('4. record-builder direct, TCP pipelined, max', 'cluster-dns', await tcpMax(rb.pid, rbPort, names));
    row('4. record-builder direct, UDP, 10k QPS', 'cluster-dns', await fixedRate(rb.pid, rbPort, names, 10_000));
  }
  await cluster.stop();
}

// ---- case 7: --workers=2 beside one worker and dnsmasq, cache hits (bench/workers.mjs)
if (want(7)) {
  const services = Array.from({ length: 1000 }, (_, i) =>
    fixtures.service('bench', `svc-${i}`, {
      clusterIPs: [`10.97.${i >> 8}.${i & 255}`],
      ports: [{ name: 'http', port: 80 }],
    }),
  );
  const cluster = await startCluster(services, { core: LOAD_CORE });
  try {
    await runWorkers({
      row,
      notes,
      names: services.map((s) => [`${s.metadata.name}.bench.svc.cluster.local`, 'A']),
      rbPort: cluster.rb.ready.dnsPort,
      forwarderArgs,
      seconds: quick ? 2 : 3,
      rounds,
      baselines,
    });
    notes.push(
      'Case 7: two workers run on both cores, one of which dnsperf also uses: on this 2-core machine the load generator takes part of the second worker’s core, so QPS with 2 workers understates what 2 free cores give.',
    );
  } finally {
    await cluster.stop();
  }
}

// ---- case 5: 10,000 Services and 100,000 endpoints, on one core and on two (bench/scale.mjs)
if (want(5)) {
  await withSelfOn(LOAD_CORE, async () => {
    const oneCore = await runScale({ cores: String(SERVER_CORE), seconds, row, quick });
    // With --baseline: each older build's bundle on one core, then ours again, in turn.
    for (const dir of baselines) {
      await runScale({ cores: String(SERVER_CORE), seconds, row, quick, dir, name: baselineName(dir) });
      await runScale({ cores: String(SERVER_CORE), seconds, row, quick });
    }
    await runSizing({ row, full: oneCore });
  });
  await runScale({ cores: `${SERVER_CORE},${LOAD_CORE}`, seconds, row, quick });
  notes.push(
    'Case 5 on one core keeps the bench process (the in-process API server that writes the churn) on core 1 with the load generator; on two cores the record-builder shares core 1 with both, so the one-core figures are the container-limited ones.',
  );
}

// ---- case 6: a change through the forwarder's warm cache, pushed or not; search walks; stale (bench/push.mjs)
if (want(6)) await runPropagation({ row, quick });

// ---- case 8: what 10,000 cached answers cost in RSS, ours beside dnsmasq's (bench/cache-memory.mjs)
if (want(8)) await runCacheMemory({ row, forwarderArgs });
if (want(11)) await runNodeCacheFootprint({ row, note: (n) => notes.push(n) });

// ---- case 9: push to 1,667 node caches (one replica's share of 5,000 nodes over three) at 100
// changes/s: the record-builder's cost, propagation (bench/fanout.mjs). With --baseline, ours and
// each older build in turn, twice: one run's ratios on a shared machine.
if (want(9))
  for (let round = 0; round < (baselines.length ? 2 : 1); round++) {
    const caches = quick ? 200 : 1667;
    await runFanout({ row, caches, seconds: quick ? 5 : seconds });
    for (const dir of baselines)
      await runFanout({ row, caches, seconds: quick ? 5 : seconds, dir, name: baselineName(dir) });
  }

// ---- case 10: one misbehaving client against the others (bench/isolation.mjs)
if (want(10))
  await runIsolation({
    row,
    notes,
    startCluster: (objects, options) => startCluster(objects, { ...options, core: LOAD_CORE }),
    seconds: quick ? 5 : seconds,
    baselines,
  });

// ---- case 12: server-side search (autopath): queries per lookup and cold latency from real pods (bench/autopath.mjs)
if (want(12)) await runAutopath({ row, notes, quick });

// ---- case 13: the record-builder's start at 5,000-node counts, streamed lists vs paged (bench/listing.mjs)
if (want(13)) await runListing({ row, notes, rounds: quick ? 1 : 2 });

// ---- case 14: node caches through a rollout of the record-builder, ours against --baseline (bench/rollout.mjs)
if (want(14)) await runRollout({ row, baselines, seconds: quick ? 6 : seconds });

// ---- report
const date = new Date().toISOString().slice(0, 10);
// A run of some cases keeps today's rows of the others (each row's case number is its prefix).
const resultFile = join(ROOT, `bench/results/${date}.json`);
if (only && existsSync(resultFile)) {
  const earlier = JSON.parse(readFileSync(resultFile, 'utf8'));
  const kept = earlier.rows.filter((r) => !only.includes(Number.parseInt(r.case, 10)));
  rows.unshift(...kept);
  rows.sort((a, b) => Number.parseInt(a.case, 10) - Number.parseInt(b.case, 10));
  // A note of a case run again is this run's to make (notes name their case: "Case 5 …").
  const rerun = (n) => only.some((c) => n.startsWith(`Case ${c} `));
  notes.push(...(earlier.notes ?? []).filter((n) => !notes.includes(n) && !rerun(n)));
}
const result = { date, machine: machine(), tools, secondsPerCase: seconds, rows, notes };
mkdirSync(join(ROOT, 'bench/results'), { recursive: true });
writeFileSync(join(ROOT, `bench/results/${date}.json`), `${JSON.stringify(result, null, 2)}\n`);
const ratio = (caseName, field, inverse = false, server = 'cluster-dns') => {
  const ours = rows.find((r) => r.case === caseName && r.server === server)?.[field];
  const ref = rows.find((r) => r.case === caseName && r.server === 'dnsmasq')?.[field];
  if (!ours || !ref) return null;
  return round(inverse ? ref / ours : ours / ref, 2);
};
const ceilingCase = rows.find((r) => r.case.startsWith('1. cache hits vs the Node ceiling'))?.case;
const vsCeiling = (server, field) => rows.find((r) => r.case === ceilingCase && r.server.startsWith(server))?.[field];
const baselineRatios = Object.fromEntries(
  rows
    .filter((r) => r.case === ceilingCase && r.server.startsWith('baseline'))
    .map((r) => [
      `cache hits QPS, ours/${r.server} (same rounds; target ≥ 1)`,
      vsCeiling('cluster-dns', 'qpsVsCeiling')
        ? round(vsCeiling('cluster-dns', 'qpsVsCeiling') / r.qpsVsCeiling, 2)
        : null,
    ]),
);
const memoryCase = rows.find((r) => r.case.startsWith('8. '))?.case;
const oneCore = (what, server = 'cluster-dns') =>
  rows.find((r) => r.case === `5. scale (1 core): ${what}` && r.server === server);
const NODE_CACHE_IMAGE = 'cluster-dns, the node-cache image';
const ratios = {
  'cache hits QPS, ours/ceiling (target ≥ 0.9)': vsCeiling('cluster-dns', 'qpsVsCeiling') ?? null,
  'cache hits CPU per query, ours/ceiling (target ≤ 1.15)': vsCeiling('cluster-dns', 'cpuVsCeiling') ?? null,
  "cache hits QPS, ours/plain dgram ceiling (the issue's as written; same rounds)":
    vsCeiling('cluster-dns', 'qpsVsCeiling') && vsCeiling('plain dgram ceiling', 'qpsVsCeiling')
      ? round(vsCeiling('cluster-dns', 'qpsVsCeiling') / vsCeiling('plain dgram ceiling', 'qpsVsCeiling'), 3)
      : null,
  'cache hits QPS, ours/dnsmasq (same rounds)':
    vsCeiling('cluster-dns', 'qpsVsCeiling') && vsCeiling('dnsmasq', 'qpsVsCeiling')
      ? round(vsCeiling('cluster-dns', 'qpsVsCeiling') / vsCeiling('dnsmasq', 'qpsVsCeiling'), 2)
      : null,
  ...baselineRatios,
  ...Object.fromEntries(
    rows
      .filter(
        (r) => r.case.startsWith('3. forwarder misses → record-builder (median') && r.server.startsWith('baseline'),
      )
      .map((r) => [`miss CPU per query, ${r.server}/ours (same rounds; ours at or below: ≥ 1)`, r.cpuVsOurs]),
  ),
  'cache hits UDP max QPS, ours/dnsmasq (target ≥ 0.7)': ratio('1. forwarder cache hits, UDP, max', 'qps'),
  'cache hits UDP CPU per query, ours/dnsmasq (target ≤ 1.5)': ratio(
    '1. forwarder cache hits, UDP, max',
    'cpuUsPerQuery',
  ),
  'cache hits TCP QPS, ours/dnsmasq (target ≥ 2)': ratio('2. forwarder cache hits, TCP pipelined, max', 'qps'),
  "cache of 10,000 answers, the node-cache image's RSS in MiB (node-local target ≤ 60)":
    rows.find((r) => r.case === memoryCase && r.server === NODE_CACHE_IMAGE)?.rssMiB ?? null,
  'cache of 10,000 answers, RSS, node-cache image/dnsmasq': ratio(memoryCase, 'rssMiB', false, NODE_CACHE_IMAGE),
  'record-builder on one core at 10k Services, start → ready, s (target ≤ 3)':
    oneCore('start to ready')?.readyS ?? null,
  'record-builder on one core, steady RSS, MiB (target ≤ 200)': oneCore('start to ready')?.steadyRssMiB ?? null,
  'record-builder on one core, idle p99 at 5k QPS by dnsperf, ms (target ≤ 1)':
    oneCore('5k QPS, no events (warm), dnsperf')?.p99Ms ?? null,
  "dnsmasq on that core right after, same client and rate: the host's floor, ms":
    oneCore("5k QPS, no events, dnsmasq on the same core (the host's floor), dnsperf", 'dnsmasq')?.p99Ms ?? null,
  'record-builder on one core, p99 at 5k QPS with 1,000 events/s by dnsperf, ms (target ≤ 10)':
    oneCore('5k QPS, 1,000 EndpointSlice events/s, dnsperf')?.p99Ms ?? null,
  ...isolationSummary(rows),
  'p99 at 10k QPS, ours − dnsmasq, ms (target ≤ 0.5)': (() => {
    const c = '1. forwarder cache hits, UDP, 10k QPS';
    const o = rows.find((r) => r.case === c && r.server === 'cluster-dns')?.p99Ms;
    const d = rows.find((r) => r.case === c && r.server === 'dnsmasq')?.p99Ms;
    return o !== undefined && d !== undefined ? round(o - d, 3) : null;
  })(),
};
/** Where a results file's written story starts: everything from it on is kept by later runs. */
const STORY_MARK = '<!-- story: written by people, kept by pnpm bench -->';
const cols = ['qps', 'lost', 'p50Ms', 'p99Ms', 'avgMs', 'cpuUsPerQuery', 'rssMiB'];
const fmt = (v) =>
  v === undefined || v === null ? '' : typeof v === 'number' ? String(round(v, v < 10 ? 3 : 0)) : String(v);
const lines = [
  `# cluster-dns benchmark, ${date}`,
  '',
  `Machine: ${result.machine.cpu}, ${result.machine.cores} cores, Node ${result.machine.node}, kernel ${result.machine.kernel}. ${seconds} s per case; servers pinned to core 0, load on core 1.`,
  '',
  `| case | server | ${cols.join(' | ')} | other |`,
  `|---|---|${cols.map(() => '---').join('|')}|---|`,
  ...rows.map((r) => {
    const other = Object.entries(r)
      .filter(([k]) => !['case', 'server', 'tool', 'sent', 'received', 'maxMs', 'quantilesMs', ...cols].includes(k))
      .map(([k, v]) => `${k} ${fmt(v)}`)
      .join(', ');
    return `| ${r.case} | ${r.server} (${r.tool ?? 'timer'}) | ${cols.map((c) => fmt(r[c])).join(' | ')} | ${other} |`;
  }),
  '',
  '| ratio | value |',
  '|---|---|',
  ...Object.entries(ratios).map(([k, v]) => `| ${k} | ${v ?? 'n/a'} |`),
  '',
  ...notes.map((n) => `- ${n}`),
  '',
];
writeFileSync(join(ROOT, `bench/results/${date}.md`), withStory(join(ROOT, `bench/results/${date}.md`), lines));
console.log(lines.join('\n'));
// A run of case 5 sets the sizing rule the docs, the manifests' requests and the RSS chart use.
if (writeSizing(join(ROOT, `bench/results/${date}.json`))) console.log('sizing rule: bench/sizing.json');
const charts = await writeCharts(result, join(ROOT, 'bench/results/charts'));
console.log(`charts: ${charts.join(', ')}`);
process.exit(0);

/**
 * The day's results file: the generated table, then the story of that day's measurements, which
 * people write below STORY_MARK and a run of the same day keeps.
 */
function withStory(path, lines) {
  const before = existsSync(path) ? readFileSync(path, 'utf8') : '';
  const at = before.indexOf(STORY_MARK);
  return [...lines, ...(at === -1 ? [] : [before.slice(at)])].join('\n');
}
