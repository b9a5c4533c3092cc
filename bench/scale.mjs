// Case 5 of pnpm bench: the record-builder at large-cluster scale, as it ships (its bundle).
// 10,000 Services, 1,000 of them headless with one 100-endpoint EndpointSlice each, the slices
// shaped as the EndpointSlice controller writes them (~30 KB of JSON each). Measured with the
// record-builder on one core (as a container limited to 1 CPU) and on two.
import { readFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { join } from 'node:path';
import { fixtures, startApiServer } from '@cluster-dns/testkit';
import { QTYPE, queryDns } from '@cluster-dns/wire';
import {
  cpuSeconds,
  LOAD_CORE,
  newMemoryCgroup,
  ROOT,
  recordBuilderArgs,
  round,
  rssTreeMiB,
  runDnsperfLatency,
  runLoadgen,
  SCRATCH,
  SERVER_CORE,
  startDnsmasq,
  startOurs,
  tools,
  withCpu,
  writeQueryFile,
} from './lib.mjs';

const SERVICES = 9000;
const HEADLESS = 1000;
const ENDPOINTS = 100;
const ns = (i) => `ns-${i % 100}`;
const ip = (h, e) => `10.${100 + (h >> 8)}.${h & 255}.${e + 1}`;

/** The case's cluster; `sizing` leaves parts out, for the per-Service and per-endpoint costs. */
export function clusterObjects({ services = SERVICES, headless = HEADLESS } = {}) {
  const objects = [];
  for (let i = 0; i < services; i++)
    objects.push(
      fixtures.service(ns(i), `svc-${i}`, {
        clusterIPs: [`10.98.${i >> 8}.${i & 255}`],
        ports: [{ name: 'http', port: 80 }],
      }),
    );
  for (let h = 0; h < headless; h++) {
    objects.push(fixtures.service(ns(h), `headless-${h}`, { headless: true, ports: [{ name: 'grpc', port: 9000 }] }));
    objects.push(baseSlice(h));
  }
  return objects;
}

const slices = new Map();
/** Headless service h's slice as the controller writes it, built once (fixtures hash uids). */
function baseSlice(h) {
  let slice = slices.get(h);
  if (!slice) {
    slice = fixtures.controllerEndpointSlice(
      ns(h),
      `headless-${h}`,
      `headless-${h}-x7k2p`,
      Array.from({ length: ENDPOINTS }, (_, e) => ({ addresses: [ip(h, e)], hostname: `pod-${e}` })),
      { ports: [{ name: 'grpc', port: 9000 }] },
    );
    slices.set(h, slice);
  }
  return slice;
}

/** The slice with endpoint `e` not ready (or its address moved), stamped now, as a rolling update writes it. */
function changedSlice(h, e, change = 'ready') {
  const base = baseSlice(h);
  const time = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  return {
    ...base,
    metadata: { ...base.metadata, annotations: { 'endpoints.kubernetes.io/last-change-trigger-time': time } },
    endpoints: base.endpoints.map((ep, i) => {
      if (i !== e) return ep;
      return change === 'ready'
        ? { ...ep, conditions: { ...ep.conditions, ready: false, serving: false } }
        : { ...ep, addresses: [change] };
    }),
  };
}

/** A query mix: cluster-IP names, headless names, endpoint names and SRV (the answers a real cluster asks). */
export function names(count, offset = 0) {
  const out = [];
  for (let i = 0; i < count; i++) {
    const k = i + offset;
    const h = k % HEADLESS;
    const pick = k % 10;
    if (pick < 7) out.push([`svc-${k % SERVICES}.${ns(k % SERVICES)}.svc.cluster.local`, 'A']);
    else if (pick === 7) out.push([`headless-${h}.${ns(h)}.svc.cluster.local`, 'A']);
    else if (pick === 8) out.push([`pod-${k % ENDPOINTS}.headless-${h}.${ns(h)}.svc.cluster.local`, 'A']);
    else out.push([`_grpc._tcp.headless-${h}.${ns(h)}.svc.cluster.local`, 'SRV']);
  }
  return out;
}

async function metric(port) {
  return (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
}

/** Upper bound of a histogram quantile, in the metric's unit, from the /metrics text. */
function histogramQuantile(text, name, q) {
  const buckets = [...text.matchAll(new RegExp(`^${name}_bucket\\{([^}]*)\\} (\\d+)`, 'gm'))]
    .map((m) => [Number(/le="([^"]+)"/.exec(m[1])?.[1]), Number(m[2])])
    .filter(([le]) => Number.isFinite(le) || le === Number.POSITIVE_INFINITY);
  const total = buckets.at(-1)?.[1] ?? 0;
  if (!total) return null;
  return buckets.find(([, c]) => c >= total * q)?.[0] ?? null;
}
const gauge = (text, name) => Number(new RegExp(`^${name} (\\S+)`, 'm').exec(text)?.[1] ?? Number.NaN);
/**
 * Each thread's V8 heap in a /metrics text, as row fields named for the moment (`when`): the
 * answering thread's (prom-client's) and the API worker's.
 */
const heapsMiB = (text, when) => ({
  [`mainHeapMiB${when}`]: round(gauge(text, 'nodejs_heap_size_total_bytes') / 1048576),
  [`workerHeapMiB${when}`]: round(gauge(text, 'clusterdns_recordbuilder_api_worker_heap_size_total_bytes') / 1048576),
});

/**
 * `fn`'s result with how late the record-builder's answering thread ran its timers meanwhile (p99
 * and max): a query tail the loop shows too is the thread's own (GC, batches, or the core taken by
 * its API worker); one it does not is outside the thread. From prom-client's nodejs_eventloop_lag_*
 * (a scrape resets them), which time a 10 ms timer: the 10 ms are taken off.
 */
async function withLoopLag(metricsPort, fn) {
  await metric(metricsPort);
  const result = await fn();
  const text = await metric(metricsPort);
  const late = (name) => round(Math.max(0, gauge(text, name) * 1000 - 10), 2);
  return {
    ...result,
    loopLateP99Ms: late('nodejs_eventloop_lag_p99_seconds'),
    loopLateMaxMs: late('nodejs_eventloop_lag_max_seconds'),
  };
}

/** Samples a process tree's RSS every 250 ms while `fn` runs; returns fn's result and the peak. */
async function peakRss(pid, fn) {
  let peak = rssTreeMiB(pid);
  const timer = setInterval(() => {
    peak = Math.max(peak, rssTreeMiB(pid));
  }, 250);
  try {
    return { result: await fn(), peakRssMiB: peak };
  } finally {
    clearInterval(timer);
    peak = Math.max(peak, rssTreeMiB(pid));
  }
}

/**
 * Memory as the container sees it, with no GC asked for: the median of a sample every 500 ms for
 * `seconds`, of the process's RSS and (where the bench could give it a memory cgroup) the
 * cgroup's usage and working set.
 */
export async function steadyMemory(pid, cgroup, seconds) {
  const rss = [];
  const workingSet = [];
  for (let i = 0; i < seconds * 2; i++) {
    rss.push(rssTreeMiB(pid));
    if (cgroup) workingSet.push(cgroup.read().workingSetMiB);
    await new Promise((r) => setTimeout(r, 500));
  }
  const median = (a) => a.sort((x, y) => x - y)[a.length >> 1];
  return { steadyRssMiB: median(rss), ...(cgroup ? { steadyCgroupWorkingSetMiB: median(workingSet) } : {}) };
}

/**
 * Runs EndpointSlice churn at `perSecond` while `fn` runs: each event turns one endpoint of one
 * headless Service not ready (and the next event of that slice turns it back).
 */
export async function withChurn(api, perSecond, fn) {
  let n = 0;
  const tick = setInterval(() => {
    for (let i = 0; i < perSecond / 100; i++) {
      const h = n % HEADLESS;
      api.apply(changedSlice(h, Math.floor(n / HEADLESS) % ENDPOINTS));
      n++;
    }
  }, 10);
  const t0 = performance.now();
  try {
    const result = await fn();
    return { result, events: n, eventsPerSecond: round(n / ((performance.now() - t0) / 1000)) };
  } finally {
    clearInterval(tick);
  }
}

/** dnsperf at 5k QPS against dnsmasq pinned where the record-builder runs, answering every name itself. */
async function hostFloor(queries, seconds) {
  const port = 19353 + (process.pid % 1000);
  const dnsmasq = await startDnsmasq(port, ['--address=/cluster.local/10.0.0.1']);
  try {
    return await withCpu(dnsmasq.pid, () =>
      runDnsperfLatency({ port, file: writeQueryFile(queries), seconds, qps: 5000 }),
    );
  } finally {
    await dnsmasq.stop();
  }
}

/** Event → answer: move one endpoint to a new address and ask until the answer has it, `count` times. */
async function eventToAnswer(api, dnsPort, count) {
  const times = [];
  for (let k = 0; k < count; k++) {
    const h = (k * 7) % HEADLESS;
    const next = `10.200.${k >> 8}.${k & 255}`;
    const name = `pod-0.headless-${h}.${ns(h)}.svc.cluster.local`;
    const t0 = performance.now();
    api.apply(changedSlice(h, 0, next));
    for (;;) {
      const r = await queryDns({ host: '127.0.0.1', port: dnsPort }, name, QTYPE.A, { timeoutMs: 2000 });
      if (r.answers.some((a) => a.address === next)) break;
      if (performance.now() - t0 > 10_000) break;
    }
    times.push(performance.now() - t0);
    api.apply(baseSlice(h));
  }
  times.sort((a, b) => a - b);
  return {
    changes: count,
    p50Ms: round(times[Math.floor(count / 2)], 2),
    p99Ms: round(times[Math.floor(count * 0.99)], 2),
  };
}

/**
 * The heap flags of a container in manifests/base/deployment.yaml (kubedns, the record-builder, unless
 * told), so the bench measures what ships; --expose-gc lets it ask for a full GC before reading RSS.
 */
export function manifestNodeOptions(container = 'kubedns') {
  const yaml = readFileSync(join(ROOT, 'manifests/base/deployment.yaml'), 'utf8');
  const at = yaml.indexOf(`- name: ${container}\n`);
  const value = at < 0 ? undefined : /name: NODE_OPTIONS, value: ([^}]+?) \}/.exec(yaml.slice(at))?.[1];
  if (!value) throw new Error(`manifests/base/deployment.yaml: no NODE_OPTIONS for the ${container} container`);
  return `${value} --expose-gc`;
}

export async function startRecordBuilder(objects, cores, cgroup, { api: apiOptions = {}, args = [], dir = ROOT } = {}) {
  const api = await startApiServer({ objects, historyLimit: 200_000, ...apiOptions });
  const kubeconfig = join(await mkdtemp(join(SCRATCH, 'bench-scale-')), 'kubeconfig');
  await api.writeKubeconfig(kubeconfig);
  const rb = await startOurs(
    'record-builder',
    [...recordBuilderArgs(kubeconfig), ...args],
    cores,
    { NODE_OPTIONS: process.env.RB_NODE_OPTIONS ?? manifestNodeOptions() },
    join(dir, 'packages/record-builder/bundle/main.js'),
    { cgroup },
  );
  return { api, rb, cpuToReadyS: cpuSeconds(rb.pid) };
}

/** RSS of the whole process tree after a full GC in both threads. */
async function settledRss(rb) {
  const gc = await (await fetch(`http://127.0.0.1:${rb.ready.healthzPort}/debug/gc`)).json();
  await new Promise((r) => setTimeout(r, 300));
  return { rssMiB: rssTreeMiB(rb.pid), gc };
}

/**
 * What the README's sizing table is computed from, on one core: an empty cluster, 10,000
 * ClusterIP Services without endpoints, and the case's cluster. Per 1k Services and per 10k
 * endpoints are the differences, divided; CPU is the process's CPU time from start to ready.
 */
export async function runSizing({ row, full }) {
  const sizes = [
    ['empty cluster', { services: 0, headless: 0 }],
    ['10,000 Services, no endpoints', { services: SERVICES + HEADLESS, headless: 0 }],
  ];
  const measured = [];
  for (const [label, shape] of sizes) {
    const { api, rb, cpuToReadyS } = await startRecordBuilder(clusterObjects(shape), String(SERVER_CORE));
    try {
      const { rssMiB } = await settledRss(rb);
      measured.push({ rssMiB, cpuToReadyS });
      row(`5. sizing: ${label}`, 'cluster-dns', {
        readyS: round(rb.readyMs / 1000, 2),
        cpuToReadyS: round(cpuToReadyS, 2),
        rssMiBAfterGc: rssMiB,
      });
    } finally {
      await rb.stop();
      await api.close();
    }
  }
  const [empty, services] = measured;
  row('5. sizing: per unit (README table)', 'cluster-dns', {
    baseRssMiB: empty.rssMiB,
    rssMiBPer1kServices: round((services.rssMiB - empty.rssMiB) / 10, 2),
    rssMiBPer10kEndpoints: round((full.rssMiB - services.rssMiB) / 10, 2),
    cpuSPer1kServices: round((services.cpuToReadyS - empty.cpuToReadyS) / 10, 3),
    cpuSPer10kEndpoints: round((full.cpuToReadyS - services.cpuToReadyS) / 10, 3),
    eventsPerCoreS: full.eventsPerCoreS,
  });
}

/** The whole case on `cores` (a taskset list: "0" or "0,1"); rows go to `row`. Returns the figures sizing needs. */
export async function runScale({ cores, seconds, row, quick, dir = ROOT, name = 'cluster-dns' }) {
  const label = `${cores.split(',').length} core${cores.includes(',') ? 's' : ''}`;
  const cgroup = newMemoryCgroup(`record-builder-${cores.replace(',', '-')}`);
  const { api, rb, cpuToReadyS } = await startRecordBuilder(clusterObjects(), cores, cgroup, { dir });
  const { dnsPort, metricsPort } = rb.ready;
  const full = { cpuToReadyS, rssMiB: 0, eventsPerCoreS: null };
  const ms = seconds * 1000;
  const load = (names, rate = 5000) =>
    withLoopLag(metricsPort, () =>
      withCpu(rb.pid, () => runLoadgen({ port: dnsPort, names, durationMs: ms, rate, timeoutMs: 1000 })),
    );
  // The same load from dnsperf, where installed: no event loop of its own to add to the tail.
  const loadByDnsperf = (names) =>
    withLoopLag(metricsPort, () =>
      withCpu(rb.pid, () => runDnsperfLatency({ port: dnsPort, file: writeQueryFile(names), seconds, qps: 5000 })),
    );
  try {
    const rssAtReady = rssTreeMiB(rb.pid);
    // What the kernel, the kubelet and the OOM killer see: no GC asked for by the bench.
    const steady = await steadyMemory(rb.pid, cgroup, quick ? 10 : 30);
    const atSteady = await metric(metricsPort);
    const { rssMiB: rssAfterGc, gc } = await settledRss(rb);
    full.rssMiB = rssAfterGc;
    row(`5. scale (${label}): start to ready`, name, {
      readyS: round(rb.readyMs / 1000, 2),
      cpuToReadyS: round(cpuToReadyS, 2),
      endpoints: rb.ready.endpoints,
      rssMiBAtReady: rssAtReady,
      ...steady,
      ...heapsMiB(atSteady, 'Steady'),
      rssMiBAfterGc: rssAfterGc,
      heapMiBAfterGc: round(gc.heapUsed / 1048576),
      workerHeapMiBAfterGc: round(gc.workerHeapUsed / 1048576),
    });
    // Right after ready: names never asked, so every headless answer is built for the first time.
    row(`5. scale (${label}): 5k QPS right after ready (cold)`, name, await load(names(ms * 5, 0)));
    const warm = await load(names(2000, 0));
    row(`5. scale (${label}): 5k QPS, no events (warm)`, name, warm);
    if (tools.dnsperf)
      row(`5. scale (${label}): 5k QPS, no events (warm), dnsperf`, name, await loadByDnsperf(names(2000, 0)));
    // The same load and client against dnsmasq on the same core, right after: what this host's
    // scheduling and wake-ups alone give at the tail, so ours is read against it, not against 1 ms.
    if (tools.dnsperf && tools.dnsmasq && !cores.includes(','))
      row(
        `5. scale (${label}): 5k QPS, no events, dnsmasq on the same core (the host's floor), dnsperf`,
        'dnsmasq',
        await hostFloor(names(2000, 0), seconds),
      );
    const afterWarm = rssTreeMiB(rb.pid);
    for (const perSecond of quick ? [1000] : [1000, 5000]) {
      const before = await metric(metricsPort);
      cgroup?.resetPeak();
      const churn = await peakRss(rb.pid, () => withChurn(api, perSecond, () => load(names(2000, 0))));
      const after = await metric(metricsPort);
      // The CPU the events cost on top of the same queries without them, as events per CPU-second.
      const eventCpu = (churn.result.result.cpuPercent - warm.cpuPercent) / 100;
      const eventsPerCoreS = eventCpu > 0 ? round(churn.result.eventsPerSecond / eventCpu) : null;
      if (perSecond === 1000) full.eventsPerCoreS = eventsPerCoreS;
      row(`5. scale (${label}): 5k QPS, ${perSecond.toLocaleString('en')} EndpointSlice events/s`, name, {
        ...churn.result.result,
        events: churn.result.events,
        eventsPerS: churn.result.eventsPerSecond,
        peakRssMiB: churn.peakRssMiB,
        peakRssVsSteady: round(churn.peakRssMiB / steady.steadyRssMiB, 2),
        peakRssVsWarm: round(churn.peakRssMiB / afterWarm, 2),
        ...(cgroup ? { peakCgroupUsageMiB: cgroup.peakMiB() } : {}),
        eventsPerCoreS,
        applyP99UsAtMost: round(
          (histogramQuantile(after, 'clusterdns_recordbuilder_event_apply_duration_seconds', 0.99) ?? Number.NaN) * 1e6,
        ),
        readToAppliedP99MsAtMost: round(
          (histogramQuantile(after, 'clusterdns_recordbuilder_event_delay_seconds', 0.99) ?? Number.NaN) * 1000,
        ),
        lagS: gauge(after, 'clusterdns_recordbuilder_event_lag_seconds'),
        backlog: gauge(after, 'clusterdns_recordbuilder_event_backlog'),
        coalesced:
          gauge(after, 'clusterdns_recordbuilder_events_coalesced_total') -
          (gauge(before, 'clusterdns_recordbuilder_events_coalesced_total') || 0),
        slowWatchersClosed: api.slowWatchersClosed(),
        // Which thread holds the peak: each V8 heap as the phase ends (the worker's as of its last report).
        ...heapsMiB(after, 'AtEnd'),
      });
      // Let a backlog drain before the next figure.
      for (let i = 0; i < 100 && gauge(await metric(metricsPort), 'clusterdns_recordbuilder_event_backlog') > 0; i++)
        await new Promise((r) => setTimeout(r, 100));
      // The same rate again from dnsperf, before the 5,000/s phase leaves its aftermath behind.
      if (tools.dnsperf && perSecond === 1000) {
        const byDnsperf = await withChurn(api, 1000, () => loadByDnsperf(names(2000, 0)));
        row(`5. scale (${label}): 5k QPS, 1,000 EndpointSlice events/s, dnsperf`, name, {
          ...byDnsperf.result,
          events: byDnsperf.events,
          eventsPerS: byDnsperf.eventsPerSecond,
        });
      }
    }
    row(
      `5. scale (${label}): event → answer in the record-builder`,
      name,
      await eventToAnswer(api, dnsPort, quick ? 50 : 200),
    );
  } finally {
    await rb.stop();
    cgroup?.remove();
    await api.close();
  }
  return full;
}

export { LOAD_CORE };
