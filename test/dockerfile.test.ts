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
          for (const s of sources) expect(stages.get(from)?.join('\n'), `${from} makes ${s}`).toContain(s);
        } else {
          for (const s of sources) expect(existsSync(`${root}/${s}`), `${stage}: COPY ${s}`).toBe(true);
        }
      }
    }
  });

  it('deploys each process with production dependencies and runs the file its build produces', () => {
    for (const p of PROCESSES) {
      expect(text).toContain(`pnpm --filter @cluster-dns/${p} deploy --prod /out/${p}`);
      const lines = stages.get(p) ?? [];
      expect(lines).toContain('ENTRYPOINT ["node", "/app/dist/main.js"]');
      expect(lines.some((l) => l.includes(`/out/${p} /app`))).toBe(true);
      // The deployed package's dist/main.js is what `tsc -b` writes from src/main.ts.
      expect(existsSync(`${root}/packages/${p}/src/main.ts`)).toBe(true);
      const pkg = JSON.parse(readFileSync(`${root}/packages/${p}/package.json`, 'utf8'));
      expect(pkg.files).toContain('dist');
      expect(JSON.parse(readFileSync(`${root}/packages/${p}/tsconfig.json`, 'utf8')).compilerOptions.outDir).toBe(
        'dist',
      );
    }
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
  });
});
