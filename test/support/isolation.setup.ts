import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCommand, waitFor } from '@cluster-dns/testkit';
import { afterAll } from 'vitest';

// Every test file gets its own temporary folder, and leaves no process, network namespace or file
// behind: a file that does fails, naming what it left, so no test depends on what another left or
// on the order files run in. Vitest runs each file in a process of its own (the forks pool), so
// "ours" is this process's descendants, namespaces named after its pid (testkit's createNetns), and
// the folder made here, which TMPDIR points every mkdtemp(tmpdir()) and child process at.

const ownTmp = mkdtempSync(join(tmpdir(), 'cdns-test-'));
process.env.TMPDIR = ownTmp;

/** Live descendants of `pid` (zombies are dead already), each with its command line. */
function descendants(pid: number): Array<{ pid: number; command: string }> {
  const children = new Map<number, number[]>();
  const commands = new Map<number, string>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // pid (comm) state ppid …: comm may hold spaces or parentheses, so read after the last ')'.
      const [state, ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (state === 'Z') continue;
      const list = children.get(Number(ppid)) ?? [];
      list.push(Number(entry));
      children.set(Number(ppid), list);
      commands.set(Number(entry), readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').join(' ').trim());
    } catch {
      // The process ended between readdir and read: not a leftover.
    }
  }
  const out: Array<{ pid: number; command: string }> = [];
  const walk = (parent: number) => {
    for (const child of children.get(parent) ?? []) {
      out.push({ pid: child, command: commands.get(child) ?? '?' });
      walk(child);
    }
  };
  walk(pid);
  return out;
}

/** Namespaces testkit's createNetns made in this process (an empty list without iproute2). */
async function ownNamespaces(): Promise<string[]> {
  const listed = await runCommand('ip', ['netns', 'list'], { timeoutMs: 10_000 });
  return listed.stdout
    .split('\n')
    .map((line) => line.split(' ')[0] ?? '')
    .filter((name) => name.startsWith(`cdns-${process.pid}-`));
}

afterAll(async () => {
  const problems: string[] = [];
  // A process stopped with SIGKILL a moment ago may not have been reaped yet: give it time.
  await waitFor(() => descendants(process.pid).length === 0, { timeoutMs: 3000, intervalMs: 20 }).catch(() => {
    const left = descendants(process.pid);
    for (const p of left) {
      try {
        process.kill(p.pid, 'SIGKILL');
      } catch {
        // Gone meanwhile.
      }
    }
    if (left.length)
      problems.push(`child processes left running: ${left.map((p) => `${p.pid} ${p.command}`).join('; ')}`);
  });
  const namespaces = await ownNamespaces();
  for (const name of namespaces) {
    await runCommand('ip', ['netns', 'del', name]);
    rmSync(`/etc/netns/${name}`, { recursive: true, force: true });
  }
  if (namespaces.length) problems.push(`network namespaces left: ${namespaces.join(', ')}`);
  rmSync(ownTmp, { recursive: true, force: true });
  if (problems.length) throw new Error(`this test file did not clean up after itself: ${problems.join('; ')}`);
});
