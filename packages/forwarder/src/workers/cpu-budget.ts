import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { posix } from 'node:path';

/**
 * The CPU this process is given: the cgroup's quota in cores (CFS: v2's cpu.max, v1's
 * cpu.cfs_quota_us over cpu.cfs_period_us; the smallest on the way up from this process's cgroup,
 * since a pod's limit may sit a level above the container's), undefined when there is none; and
 * the CPUs its affinity allows. availableParallelism() sees only the affinity: a container limited
 * to 2 CPUs on a 64-core node sees 64.
 */
export interface CpuBudget {
  readonly quotaCores: number | undefined;
  readonly affinity: number;
}

/** Reads a file's text, or undefined when it is not there (injected for tests). */
export type ReadText = (path: string) => string | undefined;

const readText: ReadText = (path) => {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
};

/**
 * Where the cgroup hierarchy is read: its usual mount, then the same seen through the parent's
 * root and PID 1's. `ip netns exec` (and a runtime that mounts a fresh sysfs) leaves /sys without
 * the cgroup mounts under it, while /proc/self/cgroup still names the process's cgroup;
 * /proc/<pid>/root reaches the hierarchy as mounted where that process runs (the parent that ran
 * `ip netns exec`; PID 1 may be closed to us, as in a container of a container).
 */
export function cgroupRoots(ppid: number): string[] {
  return ['/sys/fs/cgroup', `/proc/${ppid}/root/sys/fs/cgroup`, '/proc/1/root/sys/fs/cgroup'];
}

export function readCpuBudget(
  read: ReadText = readText,
  affinity = availableParallelism(),
  ppid = process.ppid,
): CpuBudget {
  for (const root of cgroupRoots(ppid)) {
    const found = quotasUnder(root, read);
    if (found !== undefined) return { quotaCores: found.length ? Math.min(...found) : undefined, affinity };
  }
  return { quotaCores: undefined, affinity };
}

/** The quotas on the way up from this process's cgroup, under `root`; undefined when nothing there is readable. */
function quotasUnder(root: string, read: ReadText): number[] | undefined {
  const quotas: number[] = [];
  let seen = false;
  for (const line of (read('/proc/self/cgroup') ?? '').split('\n')) {
    const [, controllers, path] = line.split(':');
    if (controllers === undefined || path === undefined) continue;
    if (controllers === '') {
      // cgroup v2: "0::/path", cpu.max is "max 100000" or "<quota> <period>".
      for (const dir of ancestors(path)) {
        const text = read(`${root}${dir}/cpu.max`);
        if (text === undefined) continue;
        seen = true;
        const [quota, period] = text.trim().split(/\s+/);
        if (quota && quota !== 'max' && Number(period) > 0) quotas.push(Number(quota) / Number(period));
      }
    } else if (controllers.split(',').includes('cpu')) {
      // cgroup v1: "N:cpu,cpuacct:/path", a quota of -1 is none.
      for (const mount of [`${root}/${controllers}`, `${root}/cpu`, `${root}/cpu,cpuacct`])
        for (const dir of ancestors(path)) {
          const quotaText = read(`${mount}${dir}/cpu.cfs_quota_us`);
          if (quotaText === undefined) continue;
          seen = true;
          const quota = Number(quotaText);
          const period = Number(read(`${mount}${dir}/cpu.cfs_period_us`));
          if (quota > 0 && period > 0) quotas.push(quota / period);
        }
    }
  }
  return seen ? quotas : undefined;
}

/** "/a/b" → "/a/b", "/a", "" (the mount's own root, which a container sees as its cgroup). */
function ancestors(path: string): string[] {
  const out: string[] = [];
  for (let dir = posix.normalize(path); dir !== '/' && dir !== '.'; dir = posix.dirname(dir)) out.push(dir);
  out.push('');
  return out;
}

/** Workers when none is given and no quota is set: a node's cores belong to its workloads. */
export const WORKERS_WITHOUT_QUOTA = 2;

/**
 * The default worker count of a node cache: one per whole core of the quota (1 under two cores),
 * within the affinity; without a quota (upstream's DaemonSet sets no CPU limit), a small cap.
 * More sockets than cores is what took CoreDNS's multisocket from 17,248 to 7,993 QPS under an
 * 8-CPU limit (coredns/coredns#6882).
 */
export function defaultWorkers(budget: CpuBudget): number {
  const cores = budget.quotaCores === undefined ? WORKERS_WITHOUT_QUOTA : Math.floor(budget.quotaCores);
  return Math.max(1, Math.min(cores, budget.affinity));
}
