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

export function readCpuBudget(read: ReadText = readText, affinity = availableParallelism()): CpuBudget {
  const quotas: number[] = [];
  for (const line of (read('/proc/self/cgroup') ?? '').split('\n')) {
    const [, controllers, path] = line.split(':');
    if (controllers === undefined || path === undefined) continue;
    if (controllers === '') {
      // cgroup v2: "0::/path", cpu.max is "max 100000" or "<quota> <period>".
      for (const dir of ancestors(path)) {
        const [quota, period] = (read(`/sys/fs/cgroup${dir}/cpu.max`) ?? '').trim().split(/\s+/);
        if (quota && quota !== 'max' && Number(period) > 0) quotas.push(Number(quota) / Number(period));
      }
    } else if (controllers.split(',').includes('cpu')) {
      // cgroup v1: "N:cpu,cpuacct:/path", a quota of -1 is none.
      for (const mount of [`/sys/fs/cgroup/${controllers}`, '/sys/fs/cgroup/cpu', '/sys/fs/cgroup/cpu,cpuacct'])
        for (const dir of ancestors(path)) {
          const quota = Number(read(`${mount}${dir}/cpu.cfs_quota_us`));
          const period = Number(read(`${mount}${dir}/cpu.cfs_period_us`));
          if (quota > 0 && period > 0) quotas.push(quota / period);
        }
    }
  }
  return { quotaCores: quotas.length ? Math.min(...quotas) : undefined, affinity };
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
