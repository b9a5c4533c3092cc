import type { NodeCacheInfo } from './cluster-model.js';

/** 32-bit FNV-1a, then murmur3's finaliser so that near-equal strings land far apart. */
function hash32(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/**
 * The replica that pushes to a node: rendezvous (highest random weight) hashing. Every replica
 * computes the same owner from the same replica list, with no coordination; when a replica comes
 * or goes, only the nodes it wins or held move (1/N of them), not a reshuffle of all.
 */
export function ownerOf(node: string, replicas: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestScore = -1;
  for (const replica of replicas) {
    const score = hash32(`${replica}|${node}`);
    if (score > bestScore || (score === bestScore && best !== undefined && replica < best)) {
      best = replica;
      bestScore = score;
    }
  }
  return best;
}

export interface NodeCacheShardCounts {
  /** Ready node-cache pods seen in the API. */
  known: number;
  /** Nodes this replica pushes to. */
  owned: number;
  /** Ready replicas the nodes are shared between (0: this one pushes to all). */
  replicas: number;
}

/**
 * The node caches found in the API (--node-cache-selector), and this replica's share of them. A
 * node cache's pod comes and goes with the watch; the replicas are --dns-service's ready
 * endpoints. Recomputed once per turn of the event loop whatever the number of changes, so the
 * first list of 5,000 pods is one computation: 5,000 × replicas hashes.
 */
export class NodeCacheShard {
  private readonly pods = new Map<string, string>();
  private replicas: readonly string[] = [];
  private owned: string[] = [];
  private scheduled = false;

  constructor(
    private readonly deps: {
      /** This replica's pod IP; empty: push to every node cache. */
      self: string;
      /** This replica's nodes changed (their addresses, each once). */
      onTargets(hosts: readonly string[]): void;
      schedule?: (fn: () => void) => void;
    },
  ) {}

  upsert(info: NodeCacheInfo): void {
    const key = `${info.namespace}/${info.name}`;
    if (this.pods.get(key) === info.hostIP) return;
    this.pods.set(key, info.hostIP);
    this.changed();
  }

  remove(namespace: string, name: string): void {
    if (this.pods.delete(`${namespace}/${name}`)) this.changed();
  }

  keys(): string[] {
    return [...this.pods.keys()];
  }

  /** The ready replicas now (sorted or not; compared as a set). */
  setReplicas(addresses: readonly string[]): void {
    const next = [...new Set(addresses)].sort();
    if (next.join() === this.replicas.join()) return;
    this.replicas = next;
    this.changed();
  }

  counts(): NodeCacheShardCounts {
    return {
      known: new Set(this.pods.values()).size,
      owned: this.owned.length,
      replicas: this.sharing() ? this.replicas.length : 0,
    };
  }

  /** Shared out only when this replica knows itself and is among the ready ones. */
  private sharing(): boolean {
    return this.deps.self !== '' && this.replicas.length > 0;
  }

  private changed(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    (this.deps.schedule ?? setImmediate)(() => {
      this.scheduled = false;
      const hosts = [...new Set(this.pods.values())].sort();
      // Not yet (or no longer) a ready endpoint: none here, the others hold every node meanwhile.
      // No replica known at all (or no --pod-ip): every node, as without sharing.
      const mine = this.sharing() ? hosts.filter((host) => ownerOf(host, this.replicas) === this.deps.self) : hosts;
      if (mine.join() === this.owned.join()) return;
      this.owned = mine;
      this.deps.onTargets(mine);
    });
  }
}
