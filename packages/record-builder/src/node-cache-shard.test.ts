import { describe, expect, it } from 'vitest';
import { NodeCacheShard, ownerOf } from './node-cache-shard.js';

const nodes = Array.from({ length: 1000 }, (_, i) => `10.0.${i >> 8}.${i & 255}`);
const replicas = ['10.244.0.5', '10.244.1.7', '10.244.2.9'];

/** A shard whose recomputation runs when the test says (the event loop's turn, by hand). */
function shardOf(self: string) {
  const runs: Array<() => void> = [];
  const targets: Array<readonly string[]> = [];
  const shard = new NodeCacheShard({
    self,
    onTargets: (hosts) => targets.push(hosts),
    schedule: (fn) => runs.push(fn),
  });
  const flush = () => {
    for (const run of runs.splice(0)) run();
  };
  return { shard, targets, flush, runs };
}

describe('node caches shared out between record-builder replicas (rendezvous hashing)', () => {
  it('gives every node exactly one owner, spread about evenly', () => {
    const owned = new Map(replicas.map((r) => [r, 0]));
    for (const node of nodes) {
      const owner = ownerOf(node, replicas) as string;
      owned.set(owner, (owned.get(owner) ?? 0) + 1);
    }
    for (const n of owned.values()) expect(n).toBeGreaterThan(250);
    // The order the replicas are listed in changes nothing.
    for (const node of nodes.slice(0, 50)) expect(ownerOf(node, [...replicas].reverse())).toBe(ownerOf(node, replicas));
  });

  it('moves only the nodes of a replica that goes, and only those a new one wins', () => {
    const before = nodes.map((n) => ownerOf(n, replicas));
    const without = nodes.map((n) => ownerOf(n, replicas.slice(0, 2)));
    nodes.forEach((_, i) => {
      if (before[i] !== replicas[2]) expect(without[i]).toBe(before[i]);
    });
    const grown = nodes.map((n) => ownerOf(n, [...replicas, '10.244.3.3']));
    const moved = grown.filter((owner, i) => owner !== before[i]);
    expect(new Set(moved)).toEqual(new Set(['10.244.3.3']));
    expect(moved.length).toBeGreaterThan(150);
    expect(moved.length).toBeLessThan(350);
  });

  it('each replica pushes to its own share: the shares partition the nodes', () => {
    const shards = replicas.map((r) => shardOf(r));
    for (const s of shards) {
      for (const [i, hostIP] of nodes.entries())
        s.shard.upsert({ namespace: 'kube-system', name: `node-local-dns-${i}`, hostIP });
      s.shard.setReplicas(replicas);
      // A thousand upserts and the replicas: one computation.
      expect(s.runs.length).toBe(1);
      s.flush();
    }
    const all = shards.flatMap((s) => s.targets.at(-1) ?? []);
    expect(all.length).toBe(nodes.length);
    expect(new Set(all).size).toBe(nodes.length);
    expect(shards[0]?.shard.counts()).toMatchObject({ known: 1000, replicas: 3 });
  });

  it('pushes to none while not a ready replica, and to all when no replica is known or it has no --pod-ip', () => {
    const notReady = shardOf('10.244.9.9');
    const some = nodes.slice(0, 40);
    for (const [i, hostIP] of some.entries())
      notReady.shard.upsert({ namespace: 'kube-system', name: `n-${i}`, hostIP });
    notReady.shard.setReplicas(replicas);
    notReady.flush();
    // Nothing to tell: it started with none, and the other replicas hold every node.
    expect(notReady.targets).toEqual([]);
    const withIt = [...replicas, '10.244.9.9'];
    notReady.shard.setReplicas(withIt);
    notReady.flush();
    const wins = some.filter((n) => ownerOf(n, withIt) === '10.244.9.9').sort();
    expect(wins.length).toBeGreaterThan(0);
    expect(notReady.targets.at(-1)).toEqual(wins);

    const alone = shardOf('10.244.0.5');
    alone.shard.upsert({ namespace: 'kube-system', name: 'a', hostIP: '10.0.0.1' });
    alone.flush();
    expect(alone.targets.at(-1)).toEqual(['10.0.0.1']);
    const anonymous = shardOf('');
    anonymous.shard.upsert({ namespace: 'kube-system', name: 'a', hostIP: '10.0.0.1' });
    anonymous.shard.setReplicas(replicas);
    anonymous.flush();
    expect(anonymous.targets.at(-1)).toEqual(['10.0.0.1']);
  });

  it('counts a node once while two of its pods are up (a surge during a rolling update), and lets it go with the last', () => {
    const s = shardOf('');
    s.shard.upsert({ namespace: 'kube-system', name: 'old', hostIP: '10.0.0.1' });
    s.shard.upsert({ namespace: 'kube-system', name: 'new', hostIP: '10.0.0.1' });
    s.flush();
    expect(s.targets.at(-1)).toEqual(['10.0.0.1']);
    s.shard.remove('kube-system', 'old');
    s.flush();
    expect(s.targets.length).toBe(1);
    s.shard.remove('kube-system', 'new');
    s.flush();
    expect(s.targets.at(-1)).toEqual([]);
    expect(s.shard.keys()).toEqual([]);
  });
});
