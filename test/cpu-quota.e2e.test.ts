import { existsSync, mkdirSync, rmdirSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  freePort,
  launchProcess,
  loopbackNodeCacheArgs,
  node22Binary,
  runChecked,
  runCommand,
} from '@cluster-dns/testkit';
import { afterEach, describe, expect, it } from 'vitest';

// Node-local mode's default worker count from the CPU it is given: started in a cgroup made here
// with a CFS quota, as a container with a CPU limit is, the node cache reads the quota and starts
// one worker per whole core of it. Needs root and cgroup v1's cpu controller (this machine's), and
// Node 22 (SO_REUSEPORT) for more than one worker.
const CPU = '/sys/fs/cgroup/cpu';
const node22 = node22Binary();
const unavailable =
  process.getuid?.() !== 0
    ? 'not root'
    : !existsSync(`${CPU}/cpu.cfs_quota_us`)
      ? 'no cgroup v1 cpu controller'
      : 'unavailable' in node22
        ? node22.unavailable
        : availableParallelism() < 2
          ? 'one CPU'
          : undefined;
if (unavailable) console.warn(`skipping the CPU quota test: ${unavailable}`);

const root = fileURLToPath(new URL('..', import.meta.url));
const cleanups: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/**
 * A node cache on loopback in a new cgroup with this many cores of quota; its worker count. With
 * `netns`, started by `ip netns exec` in a namespace made here, which mounts a fresh /sys.
 */
async function workersUnderQuota(
  cores: number,
  netns?: string,
): Promise<{ logged: Record<string, unknown>; ready: Record<string, unknown> }> {
  const group = join(CPU, `cdns-${process.pid}-${cores * 10}`);
  mkdirSync(group);
  cleanups.push(() => rmdirSync(group));
  writeFileSync(join(group, 'cpu.cfs_period_us'), '100000');
  writeFileSync(join(group, 'cpu.cfs_quota_us'), String(Math.round(cores * 100000)));
  const port = await freePort();
  const corefile = `.:${port} {\n    bind 127.0.0.1\n    forward . 127.0.0.1:1\n    prometheus 127.0.0.1:${await freePort()}\n}\n`;
  const cache = await launchProcess({
    // Into the cgroup first, then node: what it reads of /proc/self/cgroup is its own.
    // (ip netns exec after: the fresh /sys it mounts has no cgroup to write to).
    prefix: [
      'sh',
      '-c',
      `echo $$ > ${group}/cgroup.procs && exec "$0" "$@"`,
      ...(netns ? ['ip', 'netns', 'exec', netns] : []),
    ],
    script: `${root}/packages/forwarder/dist/node-cache-main.js`,
    nodeBinary: 'path' in node22 ? node22.path : undefined,
    readyMsg: 'node cache ready',
    args: await loopbackNodeCacheArgs(corefile),
  });
  cleanups.push(() => cache.stop());
  const logged = cache.logs.find((l) => l.msg === 'workers from the CPU given') as Record<string, unknown>;
  const ready = cache.logs.find((l) => l.msg === 'ready') as Record<string, unknown>;
  return { logged, ready };
}

describe.skipIf(unavailable)('node-local workers from the CPU quota', () => {
  it('starts one worker under 1.5 cores of quota, and two under 2', async () => {
    const small = await workersUnderQuota(1.5);
    expect(small.logged).toMatchObject({ workers: 1, quotaCores: 1.5 });
    // One worker is the forwarder itself, with no pool.
    expect(small.ready.workers).toBeUndefined();
    for (const c of cleanups.splice(0).reverse()) await c();
    const two = await workersUnderQuota(2);
    expect(two.logged).toMatchObject({ workers: 2, quotaCores: 2 });
    expect(two.ready.workers).toBe(2);
  }, 60_000);

  it('reads the quota under ip netns exec too, whose fresh /sys has no cgroup mounts', async () => {
    const netns = `cdns-q-${process.pid}`;
    const added = await runCommand('ip', ['netns', 'add', netns]);
    expect(added.status, added.stderr).toBe(0);
    cleanups.push(() => runCommand('ip', ['netns', 'del', netns]));
    await runChecked('ip', ['-n', netns, 'link', 'set', 'lo', 'up']);
    // What the process sees there: no cgroup hierarchy under /sys.
    const seen = await runCommand('ip', ['netns', 'exec', netns, 'ls', '/sys/fs/cgroup']);
    expect(seen.stdout.trim()).toBe('');
    const one = await workersUnderQuota(1, netns);
    expect(one.logged).toMatchObject({ workers: 1, quotaCores: 1 });
  }, 60_000);
});
