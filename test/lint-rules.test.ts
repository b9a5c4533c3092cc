import { copyFileSync, cpSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runCommand } from '@cluster-dns/testkit';
import { describe, expect, it } from 'vitest';

// The two rules CONTRIBUTING.md promises for tests, as biome (`pnpm lint`, part of `pnpm test`)
// enforces them: no bare sleep (lint/no-bare-sleep.grit) and no synchronous exec of a client
// (noRestrictedImports in biome.json's test override). Each is run on fixtures it must flag and
// fixtures it must leave alone, so a biome upgrade that quietly stops applying a rule fails here.
const root = fileURLToPath(new URL('..', import.meta.url));
const biome = `${root}/node_modules/.bin/biome`;

interface Finding {
  category: string;
  location: { path: string; start: { line: number } };
}

/** Lints `files` (path → source) with this repo's biome.json and rules; returns what it flagged. */
async function lint(files: Record<string, string>): Promise<Finding[]> {
  const project = mkdtempSync(join(tmpdir(), 'lint-rules-'));
  copyFileSync(`${root}/biome.json`, join(project, 'biome.json'));
  cpSync(`${root}/lint`, join(project, 'lint'), { recursive: true });
  for (const [path, source] of Object.entries(files)) {
    mkdirSync(join(project, path, '..'), { recursive: true });
    writeFileSync(join(project, path), source);
  }
  const run = await runCommand(biome, ['lint', '--reporter=json', '.'], { cwd: project });
  const report = JSON.parse(run.stdout) as { diagnostics: Finding[] };
  return report.diagnostics.filter(
    (d) =>
      d.category === 'plugin' ||
      d.category.endsWith('noRestrictedImports') ||
      d.category.endsWith('noRestrictedGlobals'),
  );
}

const flaggedLines = (findings: Finding[], path: string) =>
  findings.filter((f) => f.location.path === path).map((f) => f.location.start.line);

const SLEEPS = `export async function f(waiters: Array<() => void>) {
  await new Promise((r) => setTimeout(r, 50));
  await new Promise<void>((resolve) => setTimeout(resolve, 5));
  await new Promise((resolve, reject) => { setTimeout(resolve, 5); });
  await new Promise<void>((r) => { waiters.push(r); setTimeout(r, 50).unref(); });
  await new Promise<void>((resolve) => setTimeout(() => resolve(), 5));
}
`;

const NOT_SLEEPS = `export async function g(done: Promise<void>) {
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('timed out')), 5000);
    done.then(() => { clearTimeout(timer); resolve(); });
  });
  await new Promise((resolve) => setImmediate(resolve));
  setTimeout(() => undefined, 20);
}
`;

const SYNC_EXEC = `import { execFileSync, spawn } from 'node:child_process';
import { spawnSync } from 'node:child_process';
import { setTimeout as wait } from 'node:timers/promises';
import { sleep } from '@cluster-dns/runtime';
export const h = () => [execFileSync, spawn, spawnSync, wait, sleep];
`;

const GLOBALS = `export const a = Buffer.alloc(4);
export const b = performance.now();
`;

const IMPORTED = `import { Buffer } from 'node:buffer';
import { performance } from 'node:perf_hooks';
export const a = Buffer.alloc(4);
export const b = performance.now();
`;

describe('the lint rules', () => {
  it('flags every form of a bare sleep in a test, and nothing else', async () => {
    const findings = await lint({ 'test/sleeps.test.ts': SLEEPS, 'test/fine.test.ts': NOT_SLEEPS });
    expect(flaggedLines(findings, 'test/sleeps.test.ts')).toEqual([2, 3, 4, 5, 6]);
    expect(flaggedLines(findings, 'test/fine.test.ts')).toEqual([]);
  });

  it('flags synchronous exec and sleep imports in tests and test support, not in product code', async () => {
    const findings = await lint({
      'packages/x/test/support.ts': SYNC_EXEC,
      'packages/x/src/unit.test.ts': SYNC_EXEC,
      'packages/x/src/product.ts': SYNC_EXEC,
    });
    // execFileSync, spawnSync, timers/promises and runtime's sleep; spawn is fine.
    expect(flaggedLines(findings, 'packages/x/test/support.ts')).toEqual([1, 2, 3, 4]);
    expect(flaggedLines(findings, 'packages/x/src/unit.test.ts')).toEqual([1, 2, 3, 4]);
    expect(flaggedLines(findings, 'packages/x/src/product.ts')).toEqual([]);
  });

  it('flags the global Buffer and performance in the hot packages, not when imported nor elsewhere', async () => {
    const findings = await lint({
      'packages/wire/src/hot.ts': GLOBALS,
      'packages/forwarder/src/hot.ts': GLOBALS,
      'packages/record-builder/src/hot.ts': GLOBALS,
      'packages/wire/src/imported.ts': IMPORTED,
      'packages/wire/src/hot.test.ts': GLOBALS,
      'packages/sidecar/src/cold.ts': GLOBALS,
    });
    for (const path of [
      'packages/wire/src/hot.ts',
      'packages/forwarder/src/hot.ts',
      'packages/record-builder/src/hot.ts',
    ]) {
      expect(flaggedLines(findings, path)).toEqual([1, 2]);
    }
    expect(flaggedLines(findings, 'packages/wire/src/imported.ts')).toEqual([]);
    expect(flaggedLines(findings, 'packages/wire/src/hot.test.ts')).toEqual([]);
    expect(flaggedLines(findings, 'packages/sidecar/src/cold.ts')).toEqual([]);
  });
});
