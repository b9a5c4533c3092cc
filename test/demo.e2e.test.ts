import { existsSync, writeFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { launchProcess, runCommand, waitFor } from '@cluster-dns/testkit';
import { afterEach, describe, expect, it } from 'vitest';

// The README's start command as a user runs it, and stops it: its errors name the flag typed,
// a signal stops it in every state, and it leaves nothing behind.

const DEMO = fileURLToPath(new URL('../packages/testkit/dist/demo.js', import.meta.url));
const FREE_PORTS = [
  '--dns-port=0',
  '--record-builder-port=0',
  '--healthz-port=0',
  '--metrics-port=0',
  '--sidecar-port=0',
  '--forwarder-metrics-port=0',
];
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};
const cleanups: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe('the demo launcher', () => {
  it('names the flag the user typed when its port is taken, once, and starts nothing', async () => {
    const holder: Server = createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => holder.close());
    const port = (holder.address() as { port: number }).port;
    const run = await runCommand(process.execPath, [DEMO, ...FREE_PORTS, `--dns-port=${port}`]);
    expect(run.status).toBe(2);
    const lines = run.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(`--dns-port`);
    expect(lines[0]).toContain('EADDRINUSE');
    expect(run.stderr).not.toMatch(/--port\b/);
    expect(run.stdout).not.toContain('record-builder |');
  });

  it('stops at once on Ctrl-C while its record-builder waits for an API server that does not answer', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'demo-unreachable-'));
    const dead: Server = createServer((socket) => socket.destroy());
    await new Promise<void>((resolve) => dead.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => dead.close());
    const kubeconfig = join(dir, 'kubeconfig');
    writeFileSync(
      kubeconfig,
      `apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "http://127.0.0.1:${(dead.address() as { port: number }).port}"}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\nusers: [{name: u, user: {}}]\n`,
    );
    const lines: string[] = [];
    const demo = launchProcess({
      script: DEMO,
      args: [...FREE_PORTS, `--kubeconfig=${kubeconfig}`],
      readyTimeoutMs: 120_000,
      onLine: (line) => lines.push(line),
    });
    demo.catch(() => undefined);
    await waitFor(() => lines.some((l) => l.startsWith('record-builder ') && l.includes('kubeconfig loaded')), {
      timeoutMs: 20_000,
      what: 'the record-builder started against the dead API server',
    });
    const rb = await runCommand('pgrep', ['-f', kubeconfig]);
    const pids = rb.stdout.trim().split('\n').filter(Boolean).map(Number);
    expect(pids.length).toBeGreaterThan(0);
    const parent = (await runCommand('pgrep', ['-f', `${DEMO}.*--kubeconfig=${kubeconfig}`])).stdout.trim();
    process.kill(Number(parent), 'SIGINT');
    await waitFor(() => !alive(Number(parent)) && pids.every((pid) => !alive(pid)), {
      timeoutMs: 10_000,
      what: 'the launcher and its record-builder gone within seconds of Ctrl-C',
    });
    await expect(demo).rejects.toThrow(/exited with 0/);
  }, 40_000);

  it('stops everything and removes its temporary folder when its parent is killed', async () => {
    // As a process manager stops `npx … demo`: its shell dies, and the launcher is orphaned.
    const demo = await launchProcess({
      prefix: ['sh', '-c', '"$0" "$@"; true'],
      script: DEMO,
      args: FREE_PORTS,
      readyTimeoutMs: 90_000,
    });
    const { pid, kubeconfig } = demo.ready as unknown as { pid: number; kubeconfig: string };
    expect(existsSync(kubeconfig)).toBe(true);
    const children = (await runCommand('pgrep', ['-f', kubeconfig])).stdout.trim().split('\n').map(Number);
    expect(children.length).toBeGreaterThanOrEqual(1);
    demo.child.kill('SIGKILL');
    await waitFor(() => !alive(pid) && children.every((c) => !alive(c)), {
      timeoutMs: 20_000,
      what: 'the orphaned launcher and its children gone',
    });
    expect(existsSync(dirname(kubeconfig))).toBe(false);
  }, 120_000);
});
