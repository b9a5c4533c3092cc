// Case 10: one misbehaving client against everyone else (issue 34). Each attack is run against
// our forwarder with its defaults, against it with the new defences turned off by flag, against
// older checkouts (--baseline), and against dnsmasq in the same role, in one run:
//   a. random-subdomain flood (10k q/s of unique names under a domain whose upstream never
//      answers) beside a pod asking cluster names at 1k q/s (cluster TTL 5 s, so they expire);
//   b. NXDOMAIN flood in the cluster zone (10k q/s) beside a pod at 1k q/s;
//   c. one client at 20k q/s beside ten at 100 q/s each;
//   d. 40 TCP connections pipelining 5,000 queries each for a 100-endpoint answer, never reading,
//      beside a TCP client at 500 q/s.
// Load comes from dnsperf (a C client; -a gives each "pod" its source address in 127.0.0.0/8)
// and, for the stalled readers, bench/stalled-tcp.mjs. Everything targets 127.0.0.1 and stops by itself.

import { spawn } from 'node:child_process';
import dgram from 'node:dgram';
import { closeSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fixtures } from '@cluster-dns/testkit';
import { parseQuery } from '@cluster-dns/wire';
import { baselineName, startBaseline } from './hits.mjs';
import {
  cpuSeconds,
  LOAD_CORE,
  LOCAL_FORWARDER,
  pinned,
  ROOT,
  round,
  rssTreeMiB,
  SCRATCH,
  startDnsmasq,
  startOurs,
  tools,
} from './lib.mjs';

/** Our defences turned off, as far as flags go (the per-route shares stay: they have no flag). */
export const DEFENCES_OFF = [
  '--client-qps=0',
  '--client-tcp-qps=0',
  '--rrl-responses-per-second=0',
  '--subdomain-guard-misses=0',
  '--shed-after=0',
  '--jostle-timeout=1h',
  '--max-tcp-unsent-bytes=67108864',
  '--max-tcp-unsent-total-bytes=4294967296',
  '--tcp-write-timeout=1h',
];

/** A UDP server that reads every query and answers none, keeping when each name came. */
async function blackHole() {
  const socket = dgram.createSocket({ type: 'udp4', recvBufferSize: 8 * 1024 * 1024 });
  const seen = [];
  socket.on('message', (m) => {
    try {
      seen.push([Date.now(), parseQuery(m).qname.toLowerCase()]);
    } catch {
      seen.push([Date.now(), '?']);
    }
  });
  await new Promise((r) => socket.bind(0, '127.0.0.1', r));
  return { port: socket.address().port, seen, close: () => socket.close() };
}

let runs = 0;
/**
 * dnsperf from `from` at `qps`, in the background, with every answer's rcode and latency (-v into
 * a file). Resolves with the counts by rcode, the lost, and the latency quantiles.
 */
function dnsperfFrom({ port, from, names, seconds, qps, transport = 'udp', clients = 1 }) {
  const file = join(SCRATCH, `isolation-names-${++runs}.txt`);
  writeFileSync(file, `${names.join('\n')}\n`);
  const out = join(SCRATCH, `isolation-out-${runs}.txt`);
  const fd = openSync(out, 'w');
  const args = [
    ...['-s', '127.0.0.1', '-p', String(port), '-a', from, '-d', file, '-l', String(seconds)],
    ...['-Q', String(qps), '-c', String(clients), '-q', '65535', '-t', '1', '-m', transport, '-v'],
  ];
  const [command, argv] = pinned(LOAD_CORE, 'dnsperf', args);
  return new Promise((resolve, reject) => {
    const child = spawn(command, argv, { stdio: ['ignore', fd, 'ignore'] });
    const timer = setTimeout(() => child.kill('SIGKILL'), (seconds + 30) * 1000);
    child.on('error', reject);
    child.on('exit', () => {
      clearTimeout(timer);
      closeSync(fd);
      const text = readFileSync(out, 'utf8');
      rmSync(out, { force: true });
      rmSync(file, { force: true });
      const rcodes = {};
      const latencies = [];
      for (const m of text.matchAll(/^> (\S+) .* ([\d.]+)$/gm)) {
        rcodes[m[1]] = (rcodes[m[1]] ?? 0) + 1;
        latencies.push(Number(m[2]) * 1000);
      }
      latencies.sort((a, b) => a - b);
      const at = (q) =>
        latencies.length ? latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * q))] : null;
      const sent = Number(/Queries sent:\s+(\d+)/.exec(text)?.[1] ?? 0);
      const lost = Number(/Queries lost:\s+(\d+)/.exec(text)?.[1] ?? 0);
      const good = (rcodes.NOERROR ?? 0) + (rcodes.NXDOMAIN ?? 0);
      resolve({ sent, lost, rcodes, good, p50Ms: at(0.5), p99Ms: at(0.99), maxMs: latencies.at(-1) ?? null });
    });
  });
}

/** bench/stalled-tcp.mjs: `connections` TCP connections from `from` that pipeline and never read. */
function stalledReaders({ port, from, name, connections, pipeline, seconds }) {
  const [command, argv] = pinned(LOAD_CORE, process.execPath, [
    join(ROOT, 'bench/stalled-tcp.mjs'),
    JSON.stringify({ port, from, name, connections, pipeline, durationMs: seconds * 1000 }),
  ]);
  return new Promise((resolve) => {
    const child = spawn(command, argv, { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
    });
    child.on('exit', () => resolve(JSON.parse(out.trim().split('\n').at(-1) || '{}')));
  });
}

/** Samples a process tree's RSS every 100 ms until stopped: the peak, and the first sample. */
function rssSampler(pid) {
  let first = null;
  let peak = 0;
  const sample = () => {
    try {
      const now = rssTreeMiB(pid);
      first ??= now;
      peak = Math.max(peak, now);
    } catch {}
  };
  sample();
  const timer = setInterval(sample, 100);
  return () => {
    clearInterval(timer);
    return { idleMiB: first, peakMiB: round(peak, 1) };
  };
}

const uniqueNames = (n, suffix) =>
  Array.from({ length: n }, (_, i) => `r${i}-${Math.random().toString(36).slice(2, 8)}.${suffix} A`);

export async function runIsolation({ row, notes, startCluster, seconds, baselines }) {
  if (!tools.dnsperf) {
    notes.push('Case 10 needs dnsperf (apt-get install dnsperf): not run.');
    return;
  }
  const services = Array.from({ length: 100 }, (_, i) =>
    fixtures.service('bench', `svc-${i}`, { clusterIPs: [`10.97.0.${i + 1}`], ports: [{ name: 'http', port: 80 }] }),
  );
  const big = [
    fixtures.service('bench', 'big', { headless: true, ports: [{ name: 'http', port: 80 }] }),
    fixtures.endpointSlice(
      'bench',
      'big',
      'big-a',
      Array.from({ length: 100 }, (_, i) => ({ addresses: [`10.244.1.${i + 1}`] })),
      { ports: [{ name: 'http', port: 80 }] },
    ),
  ];
  // The issue's setup: cluster TTL 5 s, so the pods' names expire and are asked again under attack.
  const cluster = await startCluster([...services, ...big], { rbArgs: ['--ttl=5'] });
  const rbPort = cluster.rb.ready.dnsPort;
  const clusterNames = services.map((s) => `${s.metadata.name}.bench.svc.cluster.local A`);
  try {
    const hole = await blackHole();
    // kube-dns's dnsmasq flags, outside names to an upstream (here, one that never answers).
    const shared = [
      '--cache-size=1000',
      '--no-negcache',
      '--dns-forward-max=150',
      `--server=/cluster.local/127.0.0.1#${rbPort}`,
    ];
    const ourArgs = (extra) => [...LOCAL_FORWARDER, ...shared, `--server=127.0.0.1#${hole.port}`, ...extra];
    const servers = [
      { name: 'cluster-dns', start: () => startOurs('forwarder', ourArgs([])) },
      { name: 'cluster-dns, defences off', start: () => startOurs('forwarder', ourArgs(DEFENCES_OFF)) },
      ...baselines.map((dir) => ({ name: baselineName(dir), start: () => startBaseline(dir, ourArgs([])) })),
    ];
    if (tools.dnsmasq)
      servers.push({
        name: 'dnsmasq',
        start: async () => {
          const port = 17353 + (process.pid % 1000);
          const d = await startDnsmasq(port, [...shared, `--server=127.0.0.1#${hole.port}`]);
          return { pid: d.pid, ready: { port }, stop: d.stop };
        },
      });

    const scenarios = [
      {
        key: 'a',
        title: '10. random-subdomain flood 10k q/s to a dead upstream, cluster names 1k q/s beside it',
        attack: (port) =>
          dnsperfFrom({
            port,
            from: '127.0.0.2',
            names: uniqueNames(seconds * 12_000, 'victim.example.org'),
            seconds,
            qps: 10_000,
          }),
        upstream: true,
      },
      {
        key: 'b',
        title: '10. NXDOMAIN flood 10k q/s in the cluster zone, cluster names 1k q/s beside it',
        attack: (port) =>
          dnsperfFrom({
            port,
            from: '127.0.0.2',
            names: uniqueNames(seconds * 12_000, 'bench.svc.cluster.local'),
            seconds,
            qps: 10_000,
          }),
      },
      {
        key: 'c',
        title: '10. one client at 20k q/s, ten at 100 q/s each',
        attack: (port) =>
          dnsperfFrom({ port, from: '127.0.0.2', names: clusterNames.slice(0, 10), seconds, qps: 20_000, clients: 4 }),
        ten: true,
      },
      {
        key: 'd',
        title:
          '10. 40 TCP connections pipelining 5,000 queries for a 100-endpoint answer, never reading; a TCP client at 500 q/s',
        attack: (port) =>
          stalledReaders({
            port,
            from: '127.0.0.2',
            name: 'big.bench.svc.cluster.local',
            connections: 40,
            pipeline: 5000,
            seconds,
          }),
        tcp: true,
      },
    ];

    const onlyScenarios = (process.env.CLUSTER_DNS_BENCH_ISOLATION ?? 'abcd').split('');
    for (const scenario of scenarios.filter((x) => onlyScenarios.includes(x.key))) {
      for (const server of servers) {
        const s = await server.start();
        const port = s.ready.port;
        // Warm, as a forwarder that has run for a while is (its code compiled): cluster names and
        // misses in the zone from another address, under any rate limit, before the attack.
        await dnsperfFrom({
          port,
          from: '127.0.0.9',
          names: [...clusterNames, ...uniqueNames(3000, 'warm.bench.svc.cluster.local')],
          seconds: 2,
          qps: 1500,
        });
        const stopRss = rssSampler(s.pid);
        const cpuBefore = cpuSeconds(s.pid);
        const holeBefore = hole.seen.length;
        const startedAt = Date.now();
        const pods = scenario.ten
          ? Array.from({ length: 10 }, (_, i) =>
              dnsperfFrom({ port, from: `127.0.0.${3 + i}`, names: clusterNames, seconds, qps: 100 }),
            )
          : [
              dnsperfFrom({
                port,
                from: '127.0.0.3',
                names: scenario.tcp ? ['big.bench.svc.cluster.local A'] : clusterNames,
                seconds,
                qps: scenario.tcp ? 500 : 1000,
                transport: scenario.tcp ? 'tcp' : 'udp',
              }),
            ];
        const [attack, ...others] = await Promise.all([scenario.attack(port), ...pods]);
        const rss = stopRss();
        const cpuPercent = round((100 * (cpuSeconds(s.pid) - cpuBefore)) / ((Date.now() - startedAt) / 1000), 0);
        const sent = others.reduce((n, o) => n + o.sent, 0);
        const good = others.reduce((n, o) => n + o.good, 0);
        const worst = others.reduce((w, o) => (o.sent && o.good / o.sent < w ? o.good / o.sent : w), 1);
        const extra = {
          othersSent: sent,
          // Nothing sent: the client could not even connect (dnsmasq's TCP slots all held).
          othersNotAnsweredPct: sent ? round((100 * (sent - good)) / sent, 2) : 100,
          othersRefused: others.reduce((n, o) => n + (o.rcodes.REFUSED ?? 0), 0),
          othersServfail: others.reduce((n, o) => n + (o.rcodes.SERVFAIL ?? 0), 0),
          othersLost: others.reduce((n, o) => n + o.lost, 0),
          othersP50Ms: sent ? round(Math.max(...others.map((o) => o.p50Ms ?? 0)), 2) : null,
          othersP99Ms: sent ? round(Math.max(...others.map((o) => o.p99Ms ?? 0)), 2) : null,
          ...(scenario.ten ? { worstOfTenAnsweredPct: round(100 * worst, 2) } : {}),
          attackerAnswered: attack.good ?? attack.answered ?? null,
          attackerRcodes: attack.rcodes ? JSON.stringify(attack.rcodes) : undefined,
          ...rss,
          cpuPercent,
        };
        if (scenario.upstream) {
          const asked = hole.seen.slice(holeBefore).filter(([, n]) => n.endsWith('victim.example.org.'));
          const distinct = new Set(asked.map(([, n]) => n)).size;
          const trip = s.proc?.logs.find((l) => String(l.msg).startsWith('random-subdomain guard tripped'));
          const tripAt = trip ? Date.parse(String(trip.time)) : null;
          Object.assign(extra, {
            upstreamQueries: asked.length,
            upstreamDistinctNames: distinct,
            upstreamAfterTrip: tripAt ? asked.filter(([t]) => t > tripAt).length : null,
            guardTrippedAfterS: tripAt ? round((tripAt - startedAt) / 1000, 2) : null,
          });
        }
        // Ours say what they turned away and why.
        if (s.ready.metricsPort) {
          const text = await (await fetch(`http://127.0.0.1:${s.ready.metricsPort}/metrics`)).text();
          const series = (re) => [...text.matchAll(re)].reduce((n, m) => n + Number(m[1]), 0);
          Object.assign(extra, {
            shed: series(/^clusterdns_forwarder_limited_total\{reason="shed"\} (\S+)$/gm),
            clientLimited: series(/^clusterdns_forwarder_limited_total\{reason="client_\w+"\} (\S+)$/gm),
            shareRefused: series(/^clusterdns_forwarder_route_refused_total\{[^}]*\} (\S+)$/gm),
            jostled: series(/^clusterdns_forwarder_route_jostled_total\{[^}]*\} (\S+)$/gm),
          });
        }
        if (attack.closedByServer !== undefined) Object.assign(extra, { stalledClosed: attack.closedByServer });
        row(scenario.title, server.name, { tool: 'dnsperf', ...extra });
        await s.stop();
      }
    }
    hole.close();
    notes.push(
      'Case 10: "defences off" is our forwarder with --client-qps=0, --client-tcp-qps=0, --rrl-responses-per-second=0, --subdomain-guard-misses=0, --shed-after=0, --jostle-timeout=1h and unbounded TCP buffers; the per-route shares have no flag and stay. The pods are dnsperf with -a (one source address each); "not answered" counts REFUSED, SERVFAIL and lost alike, as the issue does.',
    );
  } finally {
    await cluster.stop();
  }
}

/** Case 10's lines of the summary table: each of issue 34's targets beside what ours measured. */
export function isolationSummary(rows) {
  const ours = (prefix) => rows.find((r) => r.case.startsWith(prefix) && r.server === 'cluster-dns');
  const a = ours('10. random-subdomain');
  const b = ours('10. NXDOMAIN flood');
  const c = ours('10. one client at 20k');
  const d = ours('10. 40 TCP connections');
  if (!a && !b && !c && !d) return {};
  return {
    'case 10a water torture: cluster names not answered, % (target 0)': a?.othersNotAnsweredPct ?? null,
    'case 10a: their p99, ms (target ≤ 5)': a?.othersP99Ms ?? null,
    'case 10a: upstream queries per distinct name (target ≤ 1)': a?.upstreamDistinctNames
      ? round(a.upstreamQueries / a.upstreamDistinctNames, 2)
      : null,
    'case 10a: upstream queries for the domain once the guard tripped (target 0)': a?.upstreamAfterTrip ?? null,
    'case 10a: RSS peak / idle (target ≤ 1.5)': a?.idleMiB ? round(a.peakMiB / a.idleMiB, 2) : null,
    'case 10b NXDOMAIN flood: others not answered, % (target 0)': b?.othersNotAnsweredPct ?? null,
    'case 10c one client at 20k q/s: the worst of ten answered, % (target 100)': c?.worstOfTenAnsweredPct ?? null,
    'case 10d stalled TCP readers: RSS peak, MiB (the manifest limit: 256)': d?.peakMiB ?? null,
    'case 10d: the other TCP client p99, ms (target ≤ 50)': d?.othersP99Ms ?? null,
  };
}
