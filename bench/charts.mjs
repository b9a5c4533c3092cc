// The benchmark's pictures, next to its tables: Vega-Lite specs compiled and rendered to SVG in
// Node (vega's headless renderer, no browser, no canvas). Each run overwrites
// bench/results/charts/*.svg, which the README shows. `node bench/charts.mjs [results.json] [dir]`
// redraws them from a results file.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as vega from 'vega';
import * as vl from 'vega-lite';
import { memoryFor, sizingRule } from './sizing.mjs';

const SERVER_COLORS = { domain: ['cluster-dns', 'dnsmasq'], range: ['#1f77b4', '#ff7f0e'] };

async function render(spec) {
  const compiled = vl.compile({ $schema: 'https://vega.github.io/schema/vega-lite/v6.json', ...spec }).spec;
  const view = new vega.View(vega.parse(compiled), { renderer: 'none' });
  return view.toSVG();
}

/** A chart's title, with the run's date and host under it: figures from different days do not compare. */
const titled = (text, result, more) => ({
  text,
  subtitle: [
    `${result.date}, ${result.machine?.cpu ?? '?'}, ${result.machine?.cores ?? '?'} cores, Node ${result.machine?.node ?? '?'}`,
    ...(more ? [more] : []),
  ],
});

/**
 * Servers as a legend says them: in words; an older build by what it is, with its commit so that
 * two baselines are two bars, not one stacked on the other.
 */
const serverName = (server) =>
  server.startsWith('baseline ')
    ? `an earlier build (${server.slice('baseline '.length)}), in the same rounds`
    : ({
        'ceiling (bare dgram)': 'Node’s ceiling: a bare dgram server, tuned as ours',
        'plain dgram ceiling': 'a plain dgram server, with dgram’s defaults',
      }[server] ?? server);

const short = (caseName) =>
  caseName
    .replace(/^(\d)\. /, '$1 ')
    .replace('forwarder ', '')
    .replace('record-builder ', 'rb ');

/** Latency at each quantile, ours and dnsmasq's, at the fixed 10k QPS of case 1. */
function latencySpec(rows, result) {
  const values = rows
    .filter((r) => r.case === '1. forwarder cache hits, UDP, 10k QPS' && Array.isArray(r.quantilesMs))
    .flatMap((r) =>
      r.quantilesMs.map(([q, ms]) => ({ server: r.server, quantile: `p${Math.round(q * 10000) / 100}`, q, ms })),
    );
  if (values.length === 0) return undefined;
  return {
    title: titled('Cache hits at 10,000 QPS (UDP): latency by quantile (case 1)', result),
    width: 520,
    height: 280,
    data: { values },
    mark: { type: 'line', point: true },
    encoding: {
      x: { field: 'quantile', type: 'ordinal', sort: { field: 'q' }, title: 'quantile' },
      y: { field: 'ms', type: 'quantitative', scale: { type: 'log' }, title: 'latency (ms, log scale)' },
      color: { field: 'server', type: 'nominal', scale: SERVER_COLORS },
    },
  };
}

/** The cases run flat out, where queries per second compare; fixed-rate cases are latency's. */
const MAX_RATE_CASES = [
  /^1\. cache hits vs the Node ceiling/,
  /^1\. forwarder cache hits, UDP, max/,
  /^2\. forwarder cache hits, TCP pipelined, max/,
  /^3\. forwarder misses/,
];

/** Colours by server: ours and dnsmasq as in every chart, the ceiling grey, baselines muted. */
function serverScale(servers) {
  const fixed = {
    'cluster-dns': '#1f77b4',
    dnsmasq: '#ff7f0e',
    [serverName('ceiling (bare dgram)')]: '#7f7f7f',
    [serverName('plain dgram ceiling')]: '#c7c7c7',
  };
  const spare = ['#9edae5', '#c5b0d5', '#c49c94', '#dbdb8d'];
  const domain = [...new Set(servers)];
  return { domain, range: domain.map((s) => fixed[s] ?? spare.shift() ?? '#cccccc') };
}

/** Queries per second at full rate: ours beside dnsmasq's, the ceiling's and any baseline's. */
function qpsSpec(rows, result) {
  const values = rows
    .filter((r) => typeof r.qps === 'number' && r.qps > 0 && MAX_RATE_CASES.some((re) => re.test(r.case)))
    .map((r) => ({
      case: short(r.case).replace(/ \(median of \d+ interleaved rounds\)/, ', interleaved'),
      server: serverName(r.server),
      qps: Math.round(r.qps),
    }));
  if (values.length === 0) return undefined;
  return {
    title: titled('Queries per second at full rate, one core (cases 1–3)', result),
    width: 420,
    data: { values },
    mark: 'bar',
    encoding: {
      y: { field: 'case', type: 'nominal', title: null, sort: null, axis: { labelLimit: 0 } },
      yOffset: { field: 'server' },
      x: { field: 'qps', type: 'quantitative', title: 'queries per second', stack: null },
      color: {
        field: 'server',
        type: 'nominal',
        scale: serverScale(values.map((v) => v.server)),
        legend: { labelLimit: 0, orient: 'bottom', columns: 2 },
      },
      tooltip: [{ field: 'qps' }],
    },
  };
}

/** Case 6: how long each kind of change takes to show through the forwarder. */
function propagationSpec(rows, result) {
  const values = rows
    .filter((r) => r.case.startsWith('6.') && typeof r.p50Ms === 'number' && typeof r.p99Ms === 'number')
    .flatMap((r) => [
      { change: short(r.case).replace(/^6 (propagation: )?/, ''), stat: 'p50', ms: Math.max(r.p50Ms, 0.01) },
      { change: short(r.case).replace(/^6 (propagation: )?/, ''), stat: 'p99', ms: Math.max(r.p99Ms, 0.01) },
    ]);
  if (values.length === 0) return undefined;
  return {
    title: titled('Change to answer through the forwarder (case 6)', result),
    width: 420,
    data: { values },
    mark: 'bar',
    encoding: {
      y: { field: 'change', type: 'nominal', title: null, sort: null, axis: { labelLimit: 0 } },
      yOffset: { field: 'stat' },
      // Bars on a log scale need a baseline above 0, and no stacking (a stack starts at 0).
      x: {
        field: 'ms',
        type: 'quantitative',
        scale: { type: 'log', domainMin: 0.1 },
        stack: null,
        title: 'milliseconds (log scale)',
      },
      x2: { datum: 0.1 },
      color: { field: 'stat', type: 'nominal', scale: { range: ['#6baed6', '#08519c'] } },
    },
  };
}

/**
 * Case 5's sizing: the record-builder's RSS against the size of the cluster. At full size, also
 * the steady RSS with no GC asked for (what the container sees) beside the one after a full GC.
 */
function rssSpec(rows, result) {
  const point = (r, endpoints, measure, field) =>
    r && typeof r[field] === 'number' ? { endpoints, measure, rss: r[field] } : undefined;
  const byCase = (name) => rows.find((r) => r.case === name);
  const full = byCase('5. scale (1 core): start to ready');
  const AFTER_GC = 'after a full GC';
  const STEADY = 'steady, no GC asked (30 s median)';
  const values = [
    point(byCase('5. sizing: empty cluster'), 0, AFTER_GC, 'rssMiBAfterGc'),
    point(byCase('5. sizing: 10,000 Services, no endpoints'), 0, AFTER_GC, 'rssMiBAfterGc'),
    point(full, 100000, AFTER_GC, 'rssMiBAfterGc'),
    point(full, 100000, STEADY, 'steadyRssMiB'),
  ].filter(Boolean);
  if (values.length === 0) return undefined;
  const rule = sizingRule(rows);
  const model = rule ? [0, 25000, 50000, 75000, 100000].map((e) => ({ endpoints: e, rss: memoryFor(rule, e) })) : [];
  return {
    title: titled(
      'Record-builder RSS by cluster size (case 5)',
      result,
      'dashed: the sizing rule (bench/sizing.mjs, docs/operator-guide.md)',
    ),
    width: 420,
    height: 260,
    layer: [
      ...(model.length
        ? [
            {
              data: { values: model },
              mark: { type: 'line', strokeDash: [4, 3], color: '#999' },
              encoding: {
                x: { field: 'endpoints', type: 'quantitative' },
                y: { field: 'rss', type: 'quantitative' },
              },
            },
          ]
        : []),
      // After-GC points as rings around the steady dots: the two often differ by less than a dot.
      ...[
        [AFTER_GC, { type: 'point', filled: false, size: 220, strokeWidth: 2 }],
        [STEADY, { type: 'point', filled: true, size: 70 }],
      ].map(([measure, mark]) => ({
        data: { values: values.filter((v) => v.measure === measure) },
        mark,
        encoding: {
          x: {
            field: 'endpoints',
            type: 'quantitative',
            title: 'endpoints (at 0: an empty cluster, and 10,000 Services without endpoints)',
            // Room at both ends, so a ring at 0 or at the last size does not cover an axis label.
            scale: { domain: [-6000, 106000], nice: false },
            axis: { values: [0, 20000, 40000, 60000, 80000, 100000] },
          },
          y: { field: 'rss', type: 'quantitative', title: 'RSS (MiB)', scale: { zero: true } },
          color: {
            field: 'measure',
            type: 'nominal',
            title: 'RSS measured',
            scale: { domain: [STEADY, AFTER_GC], range: ['#d62728', '#1f77b4'] },
            legend: { labelLimit: 0, orient: 'bottom' },
          },
        },
      })),
    ],
  };
}

/** Writes every chart the rows allow; returns the files written. */
export async function writeCharts(result, dir) {
  mkdirSync(dir, { recursive: true });
  const specs = {
    latency: latencySpec(result.rows, result),
    qps: qpsSpec(result.rows, result),
    propagation: propagationSpec(result.rows, result),
    rss: rssSpec(result.rows, result),
  };
  const written = [];
  for (const [name, spec] of Object.entries(specs)) {
    if (!spec) continue;
    const file = join(dir, `${name}.svg`);
    writeFileSync(file, `${await render(spec)}\n`);
    written.push(file);
  }
  return written;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const file = process.argv[2] ?? new URL('./results/2026-12-02.json', import.meta.url).pathname;
  const result = JSON.parse(readFileSync(file, 'utf8'));
  const dir = process.argv[3] ?? new URL('./results/charts', import.meta.url).pathname;
  console.log((await writeCharts(result, dir)).join('\n'));
}
