#!/usr/bin/env node
/**
 * The one sizing rule of the record-builder, derived from a bench run's case-5 rows: the docs
 * quote it, the manifests' requests are checked against it (test/sizing.test.ts), and the RSS
 * chart draws it. `node bench/sizing.mjs <results.json>` writes it to bench/sizing.json; a run of
 * case 5 does so too.
 *
 * memory ≈ base + per 10,000 endpoints, at the bench's shape (a Service per ten endpoints, as
 * 10,000 Services and 100,000 endpoints), as the kernel sees it with no GC asked; under churn
 * the peak is steady × churnFactor. Two points far apart (an empty cluster, the full one): the
 * increments between nearer points were within the run-to-run noise of the base.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const round = (v, digits) => Math.round(v * 10 ** digits) / 10 ** digits;

/** The rule from case 5's rows, or undefined when the run had none. */
export function sizingRule(rows) {
  const byCase = (name) => rows.find((r) => r.case === name);
  const empty = byCase('5. sizing: empty cluster');
  const full = byCase('5. scale (1 core): start to ready');
  if (!empty?.rssMiBAfterGc || !full?.steadyRssMiB || !full.endpoints) return undefined;
  const churn = rows.filter((r) => r.case.startsWith('5. scale') && typeof r.peakRssVsSteady === 'number');
  const warm = byCase('5. scale (1 core): 5k QPS, no events (warm), dnsperf');
  return {
    baseMiB: round(empty.rssMiBAfterGc, 0),
    perTenThousandEndpointsMiB: round((full.steadyRssMiB - empty.rssMiBAfterGc) / (full.endpoints / 10000), 1),
    churnFactor: round(Math.max(1, ...churn.map((r) => r.peakRssVsSteady)), 2),
    eventsPerCoreSecond: round(Math.min(...churn.map((r) => r.eventsPerCoreS).filter(Number.isFinite)), -2),
    cpuMicrosPerQuery: warm ? round(warm.cpuUsPerQuery, 0) : undefined,
    ...(nodeCacheRule(rows) ? { nodeCache: nodeCacheRule(rows) } : {}),
  };
}

/** Workers a node cache starts with no CPU quota (forwarder's workers/cpu-budget.ts). */
export const NODE_CACHE_DEFAULT_WORKERS = 2;

/**
 * The node cache's memory from case 11's rows: RSS (and its anonymous part) with 10,000 answers at
 * the default worker count, and what each further worker adds (from 1 to 8 workers).
 */
export function nodeCacheRule(rows) {
  const at = (workers) =>
    rows.find(
      (r) =>
        r.case.startsWith('11. node cache footprint') &&
        r.server === `node cache, ${workers} worker${workers > 1 ? 's' : ''}`,
    );
  const one = at(1);
  const usual = at(NODE_CACHE_DEFAULT_WORKERS);
  const eight = at(8);
  if (!one?.rssMiB || !usual?.rssMiB || !eight?.rssMiB) return undefined;
  return {
    workers: NODE_CACHE_DEFAULT_WORKERS,
    rssMiB: round(usual.rssMiB, 0),
    anonMiB: round(usual.anonMiB, 0),
    perWorkerMiB: round((eight.rssMiB - one.rssMiB) / 7, 1),
  };
}

/** Steady memory (MiB) at this many endpoints, by the rule. */
export const memoryFor = (rule, endpoints) => rule.baseMiB + (rule.perTenThousandEndpointsMiB * endpoints) / 10000;

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
export const SIZING_FILE = join(ROOT, 'bench/sizing.json');

/** Writes the rule of this results file to bench/sizing.json; false when it has no case 5. */
export function writeSizing(resultsPath) {
  const result = JSON.parse(readFileSync(resultsPath, 'utf8'));
  const rule = sizingRule(result.rows ?? []);
  if (!rule) return false;
  const from = `results/${basename(resultsPath)}`;
  writeFileSync(SIZING_FILE, `${JSON.stringify({ from, machine: result.machine, ...rule }, null, 2)}\n`);
  return true;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const path = process.argv[2];
  if (!path || !writeSizing(path)) {
    console.error('usage: node bench/sizing.mjs <results.json with case 5>');
    process.exit(2);
  }
  console.log(readFileSync(SIZING_FILE, 'utf8'));
}
