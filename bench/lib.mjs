// Plumbing for bench/run.mjs: start servers pinned to a core, measure their CPU and memory, and
// drive them with dnsperf or bench/loadgen.mjs. Everything targets 127.0.0.1 and stops by itself.
import { execFile, execFileSync, spawn, spawnSync } from 'node:child_process';
import {
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmdirSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { launchProcess } from '@cluster-dns/testkit';
import { QCLASS, QTYPE, queryDns } from '@cluster-dns/wire';

const execFileAsync = promisify(execFile);
export const ROOT = fileURLToPath(new URL('..', import.meta.url));
/** This run's files (query lists, load jobs, launch shims, kubeconfigs), gone when it exits. */
export const SCRATCH = mkdtempSync(join(tmpdir(), 'cluster-dns-bench-'));
process.on('exit', () => rmSync(SCRATCH, { recursive: true, force: true }));
export const SERVER_CORE = 0;
export const LOAD_CORE = 1;

// CLUSTER_DNS_BENCH_WITHOUT=dnsperf,dnsmasq runs the bench as a machine without them would.
const without = new Set((process.env.CLUSTER_DNS_BENCH_WITHOUT ?? '').split(',').filter(Boolean));
const has = (cmd, args = ['--version']) =>
  !without.has(cmd) && spawnSync(cmd, args, { stdio: 'ignore' }).error === undefined;
export const tools = {
  taskset: has('taskset', ['-V']),
  dnsperf: has('dnsperf', ['-h']),
  dnsmasq: has('dnsmasq', ['--version']),
  nsd: has('nsd', ['-v']),
};
const CLOCK_TICKS = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim() || 100);

/** The command prefix that pins a process to one core, when taskset exists. */
export function pinned(core, command, args) {
  return tools.taskset ? ['taskset', ['-c', String(core), command, ...args]] : [command, args];
}

/** The prefix that pins a launched script to one core (launchProcess's `prefix`), when taskset exists. */
export const pinPrefix = (core) => (tools.taskset ? ['taskset', '-c', String(core)] : []);

/** Moves a running process (all its threads) to another core. */
export function repin(pid, core) {
  if (tools.taskset) execFileSync('taskset', ['-a', '-p', '-c', String(core), String(pid)], { stdio: 'ignore' });
}

/**
 * Runs `fn` with this process (every thread) on `core`, then back where it was: the bench's own
 * work (the in-process API server writing watch events, the event generator) stays off the core
 * being measured, as an API server is off a DNS Pod's node.
 */
export async function withSelfOn(core, fn) {
  if (!tools.taskset) return fn();
  // "pid 123's current affinity list: 0,1": put back exactly that.
  const before = execFileSync('taskset', ['-pc', String(process.pid)], { encoding: 'utf8' })
    .split(': ')[1]
    ?.trim();
  repin(process.pid, core);
  try {
    return await fn();
  } finally {
    repin(process.pid, before || `0-${cpus().length - 1}`);
  }
}

export function cpuSeconds(pid) {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
}

/** RSS of a process and every process below it (threads share their process's RSS). */
export function rssTreeMiB(pid) {
  let total = rssMiB(pid);
  let children = [];
  try {
    for (const task of readdirSync(`/proc/${pid}/task`))
      children.push(...readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').trim().split(/\s+/).filter(Boolean));
  } catch {
    children = [];
  }
  for (const child of children) total += rssTreeMiB(Number(child));
  return Math.round(total * 10) / 10;
}

/**
 * A memory cgroup of its own for a process the bench starts (startOurs' `cgroup`), as a container
 * has: the bench then reads what the kubelet and the OOM killer read. The process joins it before
 * it runs (a cgroup is charged only for what its members allocate once in it; moving charges is
 * gone from current kernels). cgroup v1's memory controller, writable (the bench as root); null
 * elsewhere, and the figures are left out.
 */
export function newMemoryCgroup(name) {
  const base = '/sys/fs/cgroup/memory';
  const own = /^\d+:memory:(.*)$/m.exec(readFileSync('/proc/self/cgroup', 'utf8'))?.[1];
  if (own === undefined || !existsSync(join(base, own, 'memory.usage_in_bytes'))) return null;
  const dir = join(base, own, `cluster-dns-bench-${process.pid}-${name}`);
  try {
    mkdirSync(dir);
  } catch {
    return null;
  }
  const bytes = (file) => Number(readFileSync(join(dir, file), 'utf8'));
  const mib = (n) => Math.round((n / 1048576) * 10) / 10;
  return {
    procs: join(dir, 'cgroup.procs'),
    /** Usage, and the working set the kubelet evicts by: usage less inactive file pages. */
    read() {
      const usage = bytes('memory.usage_in_bytes');
      const stat = readFileSync(join(dir, 'memory.stat'), 'utf8');
      const inactiveFile = Number(/^total_inactive_file (\d+)$/m.exec(stat)?.[1] ?? 0);
      return { usageMiB: mib(usage), workingSetMiB: mib(usage - inactiveFile) };
    },
    /** The highest usage since the last reset. */
    peakMiB: () => mib(bytes('memory.max_usage_in_bytes')),
    resetPeak: () => writeFileSync(join(dir, 'memory.max_usage_in_bytes'), '0'),
    /** Removes the group once its process has exited (a group with members cannot go). */
    remove() {
      try {
        rmdirSync(dir);
      } catch {}
    },
  };
}

/** A memory field of /proc/<pid>/status (VmRSS, RssAnon, RssFile, …) in MiB, to 0.1. */
export function statusMiB(pid, field) {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith(`${field}:`));
  return Math.round((Number(line.split(/\s+/)[1]) / 1024) * 10) / 10;
}

export function rssMiB(pid) {
  return statusMiB(pid, 'VmRSS');
}

/** A forwarder of ours on loopback for a bench run: every port free, no lameduck, no resolv.conf. */
export const LOCAL_FORWARDER = [
  '-k',
  '--no-resolv',
  '--listen-address=127.0.0.1',
  '--port=0',
  '--lameduck=0s',
  '--metrics-port=0',
  '--metrics-address=127.0.0.1',
];

/** The record-builder's flags for a bench run: on `kubeconfig`, every port free on loopback, no lameduck. */
export { localRecordBuilderArgs as recordBuilderArgs } from '@cluster-dns/testkit';

/**
 * One of our processes, pinned to `core` (a number or a taskset list such as "0,1"), waited for
 * until its ready line. `script` defaults to its dist/main.js; the scale case runs the bundle.
 */
export async function startOurs(
  pkg,
  args,
  core = SERVER_CORE,
  env = {},
  script = join(ROOT, 'packages', pkg, 'dist/main.js'),
  { cgroup, node = process.execPath } = {},
) {
  let [command, argv] = pinned(core, node, [script, ...args]);
  // Into its cgroup (newMemoryCgroup) before it runs: a shell joins, then execs the process.
  if (cgroup) [command, argv] = ['sh', ['-c', `echo $$ > '${cgroup.procs}' && exec "$0" "$@"`, command, ...argv]];
  // launchProcess runs node itself; for pinning, wrap the script in taskset through a tiny shim.
  const shim = join(SCRATCH, `start-${pkg}.mjs`);
  writeFileSync(
    shim,
    `import { spawn } from 'node:child_process';\n` +
      `const c = spawn(${JSON.stringify(command)}, ${JSON.stringify(argv)}, { stdio: 'inherit', env: process.env });\n` +
      `for (const s of ['SIGTERM', 'SIGINT']) process.on(s, () => c.kill(s));\n` +
      `c.on('exit', (code) => process.exit(code ?? 1));\n`,
  );
  const started = performance.now();
  const proc = await launchProcess({ script: shim, args: [], env, readyTimeoutMs: 120_000 });
  const readyMs = performance.now() - started;
  // The measured process is the shim's child (taskset execs node in place).
  const pid = Number(
    execFileSync('pgrep', ['-P', String(proc.child.pid)], { encoding: 'utf8' })
      .trim()
      .split('\n')[0],
  );
  return { proc, pid, ready: proc.ready, readyMs, stop: () => proc.stop('SIGTERM', 10_000) };
}

/** dnsmasq with the equivalent configuration, pinned, answering once it answers CHAOS. */
export async function startDnsmasq(port, args) {
  const [command, argv] = pinned(SERVER_CORE, 'dnsmasq', [
    '-k',
    '--no-resolv',
    '--no-hosts',
    '--user=root',
    '--bind-interfaces',
    '--listen-address=127.0.0.1',
    `--port=${port}`,
    ...args,
  ]);
  const child = spawn(command, argv, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => {
    stderr += d;
  });
  for (let i = 0; i < 100; i++) {
    try {
      await queryDns({ host: '127.0.0.1', port }, 'cachesize.bind', QTYPE.TXT, { qclass: QCLASS.CH, timeoutMs: 200 });
      break;
    } catch {
      if (child.exitCode !== null) throw new Error(`dnsmasq exited: ${stderr}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  return {
    pid: child.pid,
    stop: () =>
      new Promise((resolve) => {
        child.on('exit', resolve);
        child.kill('SIGTERM');
      }),
  };
}

/** Runs dnsperf on the load core; returns qps, lost and average latency. */
export function runDnsperf({ port, file, seconds, mode = 'udp', qps = 0, clients = 8, passes = 0 }) {
  const args = [
    '-s',
    '127.0.0.1',
    '-p',
    String(port),
    '-d',
    file,
    '-l',
    String(seconds),
    '-c',
    String(clients),
    '-q',
    '500',
    '-m',
    mode,
    '-t',
    '2',
  ];
  if (qps) args.push('-Q', String(qps));
  // Through the whole query file this many times (within the time limit): every name asked.
  if (passes) args.push('-n', String(passes));
  const [command, argv] = pinned(LOAD_CORE, 'dnsperf', args);
  const out = execFileSync(command, argv, { encoding: 'utf8', timeout: (seconds + 30) * 1000 });
  const num = (re) => Number(re.exec(out)?.[1] ?? Number.NaN);
  return {
    tool: 'dnsperf',
    qps: num(/Queries per second:\s+([\d.]+)/),
    sent: num(/Queries sent:\s+(\d+)/),
    lost: num(/Queries lost:\s+(\d+)/),
    avgMs: num(/Average Latency \(s\):\s+([\d.]+)/) * 1000,
  };
}

let dnsperfRuns = 0;

/**
 * dnsperf at a fixed rate with every answer's latency (`-v`), on the load core, without blocking
 * this process (it may write churn meanwhile). A C client with no GC of its own: its tail is the
 * server's and the kernel's, where the Node load generator adds its own event-loop delays.
 * Its lines (400 KB/s at 5k QPS) go to a file, not a pipe: this process, busy with the churn it
 * serves on the same core, drained a pipe late, and dnsperf's receiving thread then blocked writing
 * a line, stopped reading answers and held every query behind it, 50-250 ms at a time, while the
 * measured server sat idle (perf sched timehist: both dnsperf threads asleep, the server's core idle).
 */
export async function runDnsperfLatency({ port, file, seconds, qps }) {
  const [command, argv] = aboveChurn(
    pinned(LOAD_CORE, 'dnsperf', [
      ...['-s', '127.0.0.1', '-p', String(port), '-d', file, '-l', String(seconds)],
      ...['-Q', String(qps), '-c', '1', '-t', '1', '-v'],
    ]),
  );
  const out = join(SCRATCH, `dnsperf-${process.pid}-${++dnsperfRuns}.txt`);
  const fd = openSync(out, 'w');
  let stdout;
  try {
    await new Promise((resolve, reject) => {
      const child = spawn(command, argv, { stdio: ['ignore', fd, 'inherit'] });
      const timer = setTimeout(() => child.kill('SIGKILL'), (seconds + 30) * 1000);
      child.on('error', reject);
      child.on('exit', (code, signal) => {
        clearTimeout(timer);
        if (code === 0) resolve();
        else reject(new Error(`dnsperf exited with ${signal ?? `code ${code}`}`));
      });
    });
    stdout = readFileSync(out, 'utf8');
  } finally {
    closeSync(fd);
    rmSync(out, { force: true });
  }
  // `> NOERROR svc-1.ns-1.svc.cluster.local A 0.000123`: one line per answer, latency in seconds.
  const latencies = [...stdout.matchAll(/^> \S+ .* ([\d.]+)$/gm)].map((m) => Number(m[1]) * 1000);
  latencies.sort((a, b) => a - b);
  const at = (q) =>
    latencies.length ? latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * q))] : null;
  const num = (re) => Number(re.exec(stdout)?.[1] ?? Number.NaN);
  return {
    tool: 'dnsperf -v',
    sent: num(/Queries sent:\s+(\d+)/),
    lost: num(/Queries lost:\s+(\d+)/),
    qps: num(/Queries per second:\s+([\d.]+)/),
    p50Ms: at(0.5),
    p99Ms: at(0.99),
    maxMs: latencies.at(-1) ?? null,
    quantilesMs: [0.5, 0.9, 0.99, 0.999].map((q) => [q, at(q)]),
  };
}

let loadgenJobs = 0;

/**
 * A latency client's command, run above the in-process API server's churn on the load core, so it
 * reads replies when they arrive: its figures are the server's latency, not its own wait for the
 * CPU (root only; otherwise as it is).
 */
function aboveChurn([command, argv]) {
  return process.getuid?.() === 0 ? ['nice', ['-n', '-10', command, ...argv]] : [command, argv];
}

/** Runs bench/loadgen.mjs on the load core, without blocking this process (it may apply events meanwhile). */
export async function runLoadgen(job) {
  const file = join(SCRATCH, `loadgen-${++loadgenJobs}.json`);
  writeFileSync(file, JSON.stringify({ host: '127.0.0.1', ...job }));
  const [command, argv] = aboveChurn(
    pinned(LOAD_CORE, process.execPath, [join(ROOT, 'bench/loadgen.mjs'), `@${file}`]),
  );
  const { stdout } = await execFileAsync(command, argv, {
    encoding: 'utf8',
    timeout: (job.durationMs ?? 10_000) + 30_000,
    cwd: ROOT,
  });
  return { tool: 'loadgen', ...JSON.parse(stdout.trim().split('\n').at(-1)) };
}

/** CPU time the server spent per answered query, in microseconds, while `fn` ran. */
export async function withCpu(pid, fn) {
  const before = cpuSeconds(pid);
  const t0 = performance.now();
  const result = await fn();
  const cpu = cpuSeconds(pid) - before;
  const elapsedS = (performance.now() - t0) / 1000;
  const answered = result.sent !== undefined ? result.sent - (result.lost ?? 0) : result.received;
  return {
    ...result,
    cpuUsPerQuery: answered > 0 ? Math.round((cpu / answered) * 1e7) / 10 : null,
    cpuPercent: Math.round((cpu / elapsedS) * 1000) / 10,
    rssMiB: rssMiB(pid),
  };
}

export function writeQueryFile(names) {
  const file = join(SCRATCH, `queries-${names.length}.txt`);
  writeFileSync(file, `${names.map(([n, t]) => `${n} ${t}`).join('\n')}\n`);
  return file;
}

/** Asks each name once so the cache holds them all. */
export async function warm(port, names) {
  for (const [name] of names) await queryDns({ host: '127.0.0.1', port }, name, QTYPE.A, { timeoutMs: 2000 });
}

export function machine() {
  const cpu = readFileSync('/proc/cpuinfo', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('model name'))
    ?.split(':')[1]
    ?.trim();
  return {
    cpu,
    cores: Number(execFileSync('nproc', { encoding: 'utf8' }).trim()),
    node: process.version,
    kernel: execFileSync('uname', ['-r'], { encoding: 'utf8' }).trim(),
  };
}

export const round = (n, digits = 1) =>
  n === null || n === undefined || Number.isNaN(n) ? null : Math.round(n * 10 ** digits) / 10 ** digits;
