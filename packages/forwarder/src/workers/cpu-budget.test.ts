import { describe, expect, it } from 'vitest';
import { defaultWorkers, readCpuBudget, WORKERS_WITHOUT_QUOTA } from './cpu-budget.js';

/** A node's /proc and /sys as the reader sees them. */
const files = (entries: Record<string, string>) => (path: string) => entries[path];

describe('the CPU a node cache is given', () => {
  it('reads cgroup v2’s cpu.max, the smallest quota on the way up', () => {
    const read = files({
      '/proc/self/cgroup': '0::/kubepods/pod1/ctr\n',
      '/sys/fs/cgroup/kubepods/pod1/ctr/cpu.max': 'max 100000\n',
      '/sys/fs/cgroup/kubepods/pod1/cpu.max': '250000 100000\n',
      '/sys/fs/cgroup/kubepods/cpu.max': 'max 100000\n',
    });
    expect(readCpuBudget(read, 64)).toEqual({ quotaCores: 2.5, affinity: 64 });
  });

  it('reads cgroup v1’s cfs quota and period, inside a container (its cgroup is the mount’s root)', () => {
    const read = files({
      '/proc/self/cgroup': '4:memory:/\n2:cpu,cpuacct:/\n',
      '/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us': '150000',
      '/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us': '100000',
    });
    expect(readCpuBudget(read, 8).quotaCores).toBe(1.5);
    const unlimited = files({
      '/proc/self/cgroup': '2:cpu,cpuacct:/\n',
      '/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us': '-1',
      '/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us': '100000',
    });
    expect(readCpuBudget(unlimited, 8).quotaCores).toBeUndefined();
    expect(readCpuBudget(files({}), 8)).toEqual({ quotaCores: undefined, affinity: 8 });
  });

  it('reads the hierarchy through the parent’s root where /sys has no cgroup mounts (ip netns exec mounts a fresh sysfs)', () => {
    const read = files({
      '/proc/self/cgroup': '2:cpu,cpuacct:/bench/q1\n0::/user.slice\n',
      '/proc/4242/root/sys/fs/cgroup/cpu,cpuacct/bench/q1/cpu.cfs_quota_us': '100000',
      '/proc/4242/root/sys/fs/cgroup/cpu,cpuacct/bench/q1/cpu.cfs_period_us': '100000',
    });
    expect(readCpuBudget(read, 8, 4242).quotaCores).toBe(1);
  });

  it('gives a worker per whole core of quota, 1 under two cores, a small cap without one, never past the affinity', () => {
    expect(defaultWorkers({ quotaCores: 0.5, affinity: 64 })).toBe(1);
    expect(defaultWorkers({ quotaCores: 1.9, affinity: 64 })).toBe(1);
    expect(defaultWorkers({ quotaCores: 2, affinity: 64 })).toBe(2);
    expect(defaultWorkers({ quotaCores: 8, affinity: 64 })).toBe(8);
    expect(defaultWorkers({ quotaCores: 8, affinity: 4 })).toBe(4);
    expect(defaultWorkers({ quotaCores: undefined, affinity: 64 })).toBe(WORKERS_WITHOUT_QUOTA);
    expect(defaultWorkers({ quotaCores: undefined, affinity: 1 })).toBe(1);
  });
});
