import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('..', import.meta.url));
const text = readFileSync(`${root}/docker/Dockerfile`, 'utf8');
/** Instructions with their continuation lines joined. */
const instructions = text
  .replace(/\\\n\s*/g, ' ')
  .split('\n')
  .map((l) => l.trim())
  .filter((l) => l && !l.startsWith('#'));

const stages = new Map<string, string[]>();
let current = '';
for (const line of instructions) {
  const from = /^FROM\s+(\S+)(?:\s+AS\s+(\S+))?/i.exec(line);
  if (from) {
    current = from[2] ?? from[1] ?? '';
    stages.set(current, []);
  }
  stages.get(current)?.push(line);
}
const PROCESSES = ['record-builder', 'forwarder', 'sidecar'];

describe('docker/Dockerfile, read without a Docker engine', () => {
  it('has one target per process, built on a Node 22 slim base', () => {
    for (const p of PROCESSES) expect(stages.has(p)).toBe(true);
    expect(text).toMatch(/ARG NODE_IMAGE=node:22-[a-z]+-slim/);
  });

  it('copies only sources that exist in the repository or come from a named earlier stage', () => {
    const names = [...stages.keys()];
    for (const [stage, lines] of stages) {
      for (const line of lines.filter((l) => /^COPY\s/i.test(l))) {
        const parts = line.split(/\s+/).slice(1);
        const from = parts.find((p) => p.startsWith('--from='))?.slice('--from='.length);
        const paths = parts.filter((p) => !p.startsWith('--'));
        const sources = paths.slice(0, -1);
        if (from) {
          expect(names.indexOf(from), `${stage}: --from=${from}`).toBeGreaterThanOrEqual(0);
          expect(names.indexOf(from)).toBeLessThan(names.indexOf(stage));
          const made = stages.get(from)?.join('\n') ?? '';
          for (const s of sources) {
            // docker/bundle.mjs writes /src/packages/<name>/bundle for each process it bundles.
            const bundled = /^\/src\/packages\/[a-z-]+\/bundle$/.test(s) && made.includes('node docker/bundle.mjs');
            expect(bundled || made.includes(s), `${from} makes ${s}`).toBe(true);
          }
        } else {
          for (const s of sources) expect(existsSync(`${root}/${s}`), `${stage}: COPY ${s}`).toBe(true);
        }
      }
    }
  });

  it('bundles each process and runs the bundle, which docker/bundle.mjs makes from what tsc builds', async () => {
    expect(stages.get('build')?.some((l) => l.includes('node docker/bundle.mjs'))).toBe(true);
    const { BUNDLES } = await import('../docker/bundle.mjs');
    expect(Object.keys(BUNDLES).sort()).toEqual([...PROCESSES].sort());
    for (const p of PROCESSES) {
      const lines = stages.get(p) ?? [];
      expect(lines).toContain('ENTRYPOINT ["node", "/app/main.js"]');
      expect(lines.some((l) => l.includes(`/src/packages/${p}/bundle /app`))).toBe(true);
      // The bundle's entry is dist/main.js, what `tsc -b` writes from src/main.ts.
      expect(BUNDLES[p as keyof typeof BUNDLES]).toContain('main.js');
      expect(existsSync(`${root}/packages/${p}/src/main.ts`)).toBe(true);
      expect(JSON.parse(readFileSync(`${root}/packages/${p}/tsconfig.json`, 'utf8')).compilerOptions.outDir).toBe(
        'dist',
      );
    }
  });

  it('writes bundles in ASCII that mean what the UTF-8 source meant (a one-byte source string in V8)', async () => {
    const { asciiOnly } = await import('../docker/bundle.mjs');
    const source = [
      '// RFC 6891 §6.1.3 — a comment',
      'const re = /^(\\d+)(ns|µs|ms)$/;',
      'const µ = "µs → 😀";',
      'module.exports = [re.exec("5µs")?.[2], µ, µ.length, `t→` + 1];',
    ].join('\n');
    const escaped = asciiOnly(source);
    expect(/[^\x00-\x7f]/.test(escaped)).toBe(false);
    const run = (code: string) => {
      const module = { exports: undefined as unknown };
      new Function('module', code)(module);
      return module.exports;
    };
    expect(run(escaped)).toEqual(run(source));
    expect(run(escaped)).toEqual(['µs', 'µs → 😀', 7, 't→1']);
  });

  it('keeps dns2 out of the lanes: each worker loads only what the express lane and the door read', async () => {
    const { build, stop } = await import('esbuild');
    try {
      const result = await build({
        entryPoints: [`${root}/packages/forwarder/dist/lane-worker.js`],
        bundle: true,
        platform: 'node',
        format: 'esm',
        write: false,
        metafile: true,
        outdir: '/nonexistent',
        logLevel: 'silent',
      });
      const inputs = Object.keys(Object.values(result.metafile.outputs)[0]?.inputs ?? {});
      expect(inputs.some((i) => i.includes('lane.js'))).toBe(true);
      expect(inputs.filter((i) => /dns2|wire\/dist\/message\.js/.test(i))).toEqual([]);
    } finally {
      await stop();
    }
  });

  it('has a node-cache target: the forwarder bundle’s node-local entry, as root with ip, iptables and nft', async () => {
    const lines = stages.get('node-cache') ?? [];
    expect(lines[0]).toMatch(/^FROM \$\{NODE_IMAGE\} AS node-cache$/);
    expect(lines).toContain('ENTRYPOINT ["node", "/app/node-cache-main.js"]');
    expect(lines.some((l) => l.includes('/src/packages/forwarder/bundle /app'))).toBe(true);
    const { BUNDLES } = await import('../docker/bundle.mjs');
    expect(BUNDLES.forwarder).toContain('node-cache-main.js');
    expect(existsSync(`${root}/packages/forwarder/src/node-cache-main.ts`)).toBe(true);
    const installs = lines.find((l) => l.startsWith('RUN apt-get')) ?? '';
    for (const pkg of ['iproute2', 'iptables', 'nftables']) expect(installs).toContain(pkg);
    // NET_ADMIN's rules and links need root, as node-cache runs; the other images stay 1001.
    expect(lines.some((l) => /^USER\s/.test(l))).toBe(false);
  });

  it('runs as the non-root user 1001 with OCI labels', () => {
    const runtime = stages.get('runtime') ?? [];
    expect(runtime).toContain('USER 1001:1001');
    for (const p of PROCESSES) expect((stages.get(p) ?? []).some((l) => /^USER\s+(0|root)/.test(l))).toBe(false);
    expect(text).toContain('org.opencontainers.image.source');
    expect(text).toContain('org.opencontainers.image.title');
  });

  it('keeps node_modules and build output out of the build context', () => {
    const ignore = readFileSync(`${root}/.dockerignore`, 'utf8');
    expect(ignore).toContain('**/node_modules');
    expect(ignore).toContain('**/dist');
    expect(ignore).toContain('**/bundle');
    expect(ignore).toContain('!docker/bundle.mjs');
  });
});
