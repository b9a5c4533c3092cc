// Bundles each process into packages/<name>/bundle/: one ES module holding only the code the
// process can reach, which is what the images ship (docker/Dockerfile) and what the bench measures.
//   node docker/bundle.mjs [--report]      (after tsc -b)
// Why: @kubernetes/client-node's KubeConfig module imports its whole generated API client
// (~27 MB of JavaScript, every model and API class); a bundle keeps the few pieces reached.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build, stop } from 'esbuild';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
/** Entry points of each process: its main, and any worker it starts by file name. */
export const BUNDLES = {
  'record-builder': ['main.js', 'api-worker.js'],
  // node-cache-main.js: the forwarder in node-local mode (the node-cache image); lane-worker.js:
  // each lane of --workers and -workers (a worker thread beside the main thread's forwarder).
  forwarder: ['main.js', 'node-cache-main.js', 'lane-worker.js'],
  sidecar: ['main.js'],
};

/**
 * The bundle with every non-ASCII character as a \uXXXX escape. V8 keeps each script's source in the
 * heap for lazy compilation, and a single non-ASCII character (a "§" in a comment) makes it store
 * the whole source two bytes per character: 1.6 MiB more of each forwarder thread's heap, and of
 * the record-builder's threads. esbuild escapes strings already; comments and regular expressions
 * keep theirs, and the escape means the same there (and in identifiers).
 */
export function asciiOnly(text) {
  return text.replace(/[^\x00-\x7f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

const report = process.argv.includes('--report');
for (const [name, entries] of Object.entries(BUNDLES)) {
  const dist = join(root, 'packages', name, 'dist');
  const outdir = join(root, 'packages', name, 'bundle');
  mkdirSync(outdir, { recursive: true });
  const result = await build({
    entryPoints: entries.map((e) => join(dist, e)),
    outdir,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    // CommonJS dependencies (express) call require() for node's built-ins; ESM has none.
    banner: {
      js: "import { createRequire as __createRequire } from 'node:module';\nconst require = __createRequire(import.meta.url);",
    },
    // Error classes name themselves with new.target.name; bundling must not rename them.
    keepNames: true,
    legalComments: 'external',
    metafile: true,
    logLevel: 'warning',
  });
  const outputs = Object.entries(result.metafile.outputs).filter(([file]) => file.endsWith('.js'));
  for (const [file] of outputs) writeFileSync(resolve(file), asciiOnly(readFileSync(resolve(file), 'utf8')));
  writeFileSync(join(outdir, 'package.json'), `${JSON.stringify({ type: 'module', private: true }, null, 2)}\n`);
  const bytes = outputs.reduce((n, [, o]) => n + o.bytes, 0);
  console.log(`${name}: ${outputs.length} file(s), ${(bytes / 1048576).toFixed(1)} MiB in ${relative(root, outdir)}`);
  if (report) {
    const byPackage = new Map();
    for (const [, output] of outputs) {
      for (const [input, { bytesInOutput }] of Object.entries(output.inputs)) {
        const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(input.replace(/.*\.pnpm\/[^/]+\//, ''))?.[1] ?? 'ours';
        byPackage.set(pkg, (byPackage.get(pkg) ?? 0) + bytesInOutput);
      }
    }
    for (const [pkg, n] of [...byPackage].sort((a, b) => b[1] - a[1]).slice(0, 12))
      console.log(`  ${(n / 1024).toFixed(0).padStart(6)} KiB  ${pkg}`);
  }
}
// esbuild's service process outlives the builds unless stopped (and with it, a test that imports this).
await stop();
// The bundles depend on nothing but node: check no package was left out as external.
for (const name of Object.keys(BUNDLES)) {
  const text = readFileSync(join(root, 'packages', name, 'bundle', 'main.js'), 'utf8');
  const bare = [...text.matchAll(/^import .* from ["']([^"'.][^"']*)["'];?$/gm)]
    .map((m) => m[1])
    .filter((spec) => !spec.startsWith('node:') && !builtinModules.includes(spec));
  if (bare.length) throw new Error(`${name}: the bundle still imports ${bare.join(', ')}`);
}
