import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// Modules of a package import each other one way: a cycle, even of types only, means a type lives
// in the wrong module (move it down, as dns-handler.ts, dns-flags.ts and zone-view.ts were).
const packages = fileURLToPath(new URL('../packages', import.meta.url));

/**
 * Each cycle among the relative imports of these files (path in the package's src → text), as
 * "a.ts → b.ts → a.ts"; imports into other folders (`../config/x.js`) count too.
 */
function cyclesIn(files: ReadonlyMap<string, string>): string[] {
  const graph = new Map<string, string[]>();
  for (const [file, text] of files)
    graph.set(
      file,
      [...text.matchAll(/from '(\.\.?\/[\w./-]+)\.js'/g)].map((m) => normalize(join(dirname(file), `${m[1]}.ts`))),
    );
  const cycles = new Set<string>();
  const walk = (file: string, path: string[]) => {
    for (const next of graph.get(file) ?? []) {
      const at = path.indexOf(next);
      if (at >= 0) {
        const cycle = path.slice(at);
        // One spelling per cycle: starting from its smallest name.
        const start = cycle.indexOf([...cycle].sort()[0] as string);
        cycles.add([...cycle.slice(start), ...cycle.slice(0, start), cycle[start]].join(' → '));
      } else if (path.length < 30) walk(next, [...path, next]);
    }
  };
  for (const file of graph.keys()) walk(file, [file]);
  return [...cycles];
}

const cyclesOf = (pkg: string) => {
  const src = `${packages}/${pkg}/src`;
  const files = (readdirSync(src, { recursive: true }) as string[]).filter(
    (f) => f.endsWith('.ts') && !f.endsWith('.test.ts'),
  );
  return cyclesIn(new Map(files.map((f) => [f, readFileSync(`${src}/${f}`, 'utf8')])));
};

describe('imports within a package', () => {
  it.each(readdirSync(packages))('%s has no import cycle', (pkg) => {
    expect(cyclesOf(pkg)).toEqual([]);
  });

  it('finds a cycle where there is one, of types too (the check can fail)', () => {
    // As wire's listener and tcp-connection had, through their types.
    const files = new Map([
      ['listener.ts', "import { serve } from './tcp-connection.js';"],
      ['tcp-connection.ts', "import type { Reply } from './listener.js';"],
      ['pipeline.ts', "import type { Reply } from './listener.js';"],
    ]);
    expect(cyclesIn(files)).toEqual(['listener.ts → tcp-connection.ts → listener.ts']);
  });

  it('follows imports across folders (a plugin and the server that builds it)', () => {
    const files = new Map([
      ['server/forwarder.ts', "import { CacheStage } from '../plugins/cache/cache-stage.js';"],
      ['plugins/cache/cache-stage.ts', "import type { Forwarder } from '../../server/forwarder.js';"],
    ]);
    expect(cyclesIn(files)).toEqual([
      'plugins/cache/cache-stage.ts → server/forwarder.ts → plugins/cache/cache-stage.ts',
    ]);
  });
});
