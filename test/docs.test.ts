import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { forwarderFlags, nodeCacheFlags } from '@cluster-dns/forwarder';
import { recordBuilderFlags } from '@cluster-dns/record-builder';
import { PLUGIN_TABLE } from '@cluster-dns/runtime';
import { sidecarFlags } from '@cluster-dns/sidecar';
import { demoFlags } from '@cluster-dns/testkit';
import { describe, expect, it } from 'vitest';

// The docs name files and flags; a rename that leaves a doc behind fails here.

const root = fileURLToPath(new URL('..', import.meta.url));
const SKIP = new Set(['node_modules', 'dist', 'build', '.git']);

function walk(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    if (SKIP.has(name)) continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) walk(path, out);
    else out.push(relative(root, path));
  }
  return out;
}
const files = walk(root);

/** Every doc a user or a contributor reads. */
const docs = [
  'README.md',
  'CONTRIBUTING.md',
  'bench/README.md',
  'manifests/README.md',
  ...files.filter((f) => /^docs\/.*\.md$/.test(f) || /^packages\/.*README\.md$/.test(f)),
];

/**
 * Names the docs mention that are not files of this repository, each for a reason: upstream's
 * manifests, files the reader makes, product names, and names CONTRIBUTING says not to use.
 */
const NOT_OURS = new Set([
  'kube-dns.yaml',
  'nodelocaldns.yaml',
  'my-service.yaml',
  'coredns-deployment.yaml',
  'Node.js',
  'Jazzer.js',
  'utils.ts',
  'helpers.ts',
  'common.ts',
]);

/** A built file (`dist/x.js`) exists when its source does. */
const sourceOf = (name: string) => name.replace(/(^|\/)dist\//, '$1src/').replace(/\.js$/, '.ts');

function exists(doc: string, name: string): boolean {
  if (name.startsWith('./') || name.startsWith('../')) {
    const path = resolve(root, dirname(doc), name);
    return existsSync(path) || existsSync(sourceOf(path));
  }
  return [name, sourceOf(name)].some((n) => files.some((f) => f === n || f.endsWith(`/${n}`)));
}

/** Every flag name (and alias) of every process, and of the demo. */
function knownFlags(): Set<string> {
  const out = new Set<string>();
  for (const table of [forwarderFlags, nodeCacheFlags, recordBuilderFlags, sidecarFlags, demoFlags])
    for (const [name, spec] of Object.entries(table)) {
      out.add(name);
      for (const alias of (spec as { aliases?: readonly string[] }).aliases ?? []) out.add(alias);
    }
  return out;
}

describe('the docs', () => {
  it('name only files that exist', () => {
    const missing: string[] = [];
    for (const doc of docs) {
      const text = readFileSync(join(root, doc), 'utf8');
      for (const m of text.matchAll(/(?:\.{1,2}\/)*[\w./-]*[\w-]+\.(?:ts|mjs|js|md|yaml|json|svg)\b/g)) {
        const name = m[0];
        // A pattern (`*-stage.ts`, `<stage>.test.ts`, `packages/*/dist/main.js`) names no one file.
        if (/[*<>]/.test(text[(m.index ?? 0) - 1] ?? '') || /^[-./]/.test(name.replace(/^\.{1,2}\//, 'x'))) continue;
        if (NOT_OURS.has(name)) continue;
        if (!exists(doc, name)) missing.push(`${doc}: ${name}`);
      }
    }
    expect(missing).toEqual([]);
  });

  it('name only flags that exist, in backquotes', () => {
    const flags = knownFlags();
    const unknown: string[] = [];
    for (const doc of docs) {
      const text = readFileSync(join(root, doc), 'utf8');
      // A flag is written in code, `--name[=value]` or `-name` (node-cache's Go spelling).
      const code = text.split('`').filter((_, i) => i % 2 === 1);
      for (const span of code) {
        const name = /^--?([a-z][a-z0-9-]*[a-z0-9])(?:[= ].*)?$/.exec(span)?.[1];
        if (name && !flags.has(name) && !OTHER_TOOLS.has(name)) unknown.push(`${doc}: ${name}`);
      }
    }
    expect([...new Set(unknown)]).toEqual([]);
  });

  it('keep the README a front door (16 KB at most)', () => {
    expect(readFileSync(join(root, 'README.md')).length).toBeLessThanOrEqual(16 * 1024);
  });

  it('keep each package README a reference (25 KB at most)', () => {
    const readmes = files.filter((f) => /^packages\/.*README\.md$/.test(f));
    expect(readmes.length).toBeGreaterThan(6);
    expect(readmes.filter((f) => readFileSync(join(root, f)).length > 25 * 1024)).toEqual([]);
  });

  it('say for every plugin a Corefile may name whether it runs, is ignored or refused, as the reader does', () => {
    const doc = readFileSync(`${root}/docs/corefile.md`, 'utf8');
    const rows = new Map(
      [...doc.matchAll(/^\| `([a-z0-9_]+)` \| (runs|ignored|refused) \|/gm)].map((m) => [m[1], m[2]] as const),
    );
    expect(Object.fromEntries(PLUGIN_TABLE.map(([name]) => [name, rows.get(name)]))).toEqual(
      Object.fromEntries(PLUGIN_TABLE.map(([name, support]) => [name, support.status])),
    );
  });

  it('have each chain stage’s test beside it', () => {
    const stages = files.filter((f) => /\/src\/.*-stage\.ts$/.test(f));
    expect(stages.length).toBeGreaterThan(10);
    expect(stages.filter((f) => !files.includes(f.replace(/\.ts$/, '.test.ts')))).toEqual([]);
  });
});

/** Flags of other programs the docs show in commands: kubectl, kubelet, dig, pnpm, node, and so on. */
const OTHER_TOOLS = new Set<string>([
  'help', // every process's --help
  'quick', // pnpm bench
  'baseline',
  'target', // podman build
  'if-available', // pnpm pod-test
  'cluster-dns', // kubelet
  'cluster-domain',
  'max-old-space-size', // node
  'expose-gc',
  'optimize-for-size', // V8 flags tried on the lanes (bench/README.md, case 11)
  'no-sparkplug',
  'max-lazy',
  'single-threaded-gc',
  'validate', // kubectl
  'records-file', // testkit's upstream-cli
  'p53', // dnsmasq's -p53 form, in runtime's flag syntax
  'flag', // Go's `-flag value` spelled out
]);
