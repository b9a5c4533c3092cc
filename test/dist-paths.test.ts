import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// Worker stand-ins, bench scripts, the pod test and test harnesses load the build by path, out of
// the type-checker's sight. When a module moves, a developer's old dist/ still holds it and the stale
// path keeps working there; on a fresh clone it is gone. Each such path must name a source today.
const root = fileURLToPath(new URL('..', import.meta.url));

function scripts(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    if (e.name === 'node_modules' || e.name === 'dist' || e.name === 'bundle') return [];
    const path = join(dir, e.name);
    return e.isDirectory()
      ? scripts(path)
      : /\.(mjs|ts)$/.test(e.name) && e.name !== 'dist-paths.test.ts'
        ? [path]
        : [];
  });
}

/** Each `…dist/<path>.js` the file names (relative imports and packages/<pkg>/dist/ paths), as the source it stands for. */
function sourcesNamed(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const named = [
    ...[...text.matchAll(/from '(\.\.?\/[\w./-]*dist\/[\w./-]+)\.js'/g)].map((m) =>
      join(dirname(file), m[1] as string),
    ),
    ...[...text.matchAll(/'(packages\/[\w-]+\/dist\/[\w./-]+)\.js'/g)].map((m) => join(root, m[1] as string)),
  ];
  return named.map((p) => `${p.replace(/\/dist\//, '/src/')}.ts`);
}

describe('paths into dist/ from plain scripts', () => {
  const files = [...scripts(join(root, 'packages')), ...scripts(join(root, 'bench')), ...scripts(join(root, 'test'))];

  it('finds the scripts it guards (the worker stand-ins among them)', () => {
    const names = files.map((f) => relative(root, f));
    expect(names).toContain('packages/forwarder/test/fixtures/store-hammer.mjs');
    expect(names).toContain('packages/forwarder/test/fixtures/crashing-worker.mjs');
    expect(files.flatMap(sourcesNamed).length).toBeGreaterThan(5);
  });

  it('each names a module that has a source, so a fresh clone builds what it loads', () => {
    const missing = files.flatMap((f) =>
      sourcesNamed(f)
        .filter((src) => !existsSync(src))
        .map((src) => `${relative(root, f)} → ${relative(root, src)}`),
    );
    expect(missing).toEqual([]);
  });
});
