import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runCommand } from '@cluster-dns/testkit';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('..', import.meta.url));

describe('bench charts', () => {
  it('draws the four charts from a results file, with their data in them', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'charts-'));
    const run = await runCommand(process.execPath, [
      `${root}/bench/charts.mjs`,
      `${root}/bench/results/2026-12-01.json`,
      dir,
    ]);
    expect(run.status, run.stderr).toBe(0);
    expect(readdirSync(dir).sort()).toEqual(['latency.svg', 'propagation.svg', 'qps.svg', 'rss.svg']);
    const svg = (name: string) => readFileSync(join(dir, name), 'utf8');
    expect(svg('latency.svg')).toMatch(/^<svg/);
    expect(svg('latency.svg')).toContain('dnsmasq');
    expect(svg('latency.svg')).toContain('p99.9');
    expect(svg('qps.svg')).toContain('cache hits, UDP, max');
    // Only full-rate cases compare by QPS; fixed-rate ones are the latency chart's.
    expect(svg('qps.svg')).not.toContain('10k QPS');
    expect(svg('qps.svg')).not.toContain('5k QPS');
    expect(svg('propagation.svg')).toContain('Service re-created with a new cluster IP');
    expect(svg('rss.svg')).toContain('after a full GC');
    // Vega cuts a label or legend entry longer than its limit with an ellipsis: none is cut.
    // Nor is a mark drawn at NaN, or a bar drawn zero wide (bars stacked from 0 on a log scale
    // were: the propagation chart showed nothing).
    for (const name of ['latency.svg', 'propagation.svg', 'qps.svg', 'rss.svg']) {
      expect(svg(name)).not.toContain('…');
      expect(svg(name)).not.toContain('NaN');
      expect(svg(name)).not.toMatch(/aria-roledescription="bar" d="M[-\d.]+,[-\d.]+h0v/);
    }
  });

  it('draws two baselines of one run as two bars, each named by its commit, never stacked', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'charts-'));
    const run = await runCommand(process.execPath, [
      `${root}/bench/charts.mjs`,
      `${root}/bench/results/2026-12-07.json`,
      dir,
    ]);
    expect(run.status, run.stderr).toBe(0);
    const qps = readFileSync(join(dir, 'qps.svg'), 'utf8');
    expect(qps).toContain('an earlier build (ef6332b), in the same rounds');
    expect(qps).toContain('an earlier build (2a3db59), in the same rounds');
  });

  it('shows in the bench README the charts it draws', () => {
    const readme = readFileSync(`${root}/bench/README.md`, 'utf8');
    for (const name of ['latency', 'qps', 'propagation', 'rss'])
      expect(readme).toContain(`(results/charts/${name}.svg)`);
  });
});
