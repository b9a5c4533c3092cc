import { Buffer } from 'node:buffer';
import { QTYPE, RCODE, type Reply, replyRcode, scanResponse } from '@cluster-dns/wire';
import { LRUCache } from 'lru-cache';
import type { ClientEntry } from './client-map.js';

/** What the kept walks read of the cache below: its drop count and its clock. */
export interface KeptWalksDeps {
  /**
   * The cache's count of drops (AnswerCache.writeToken): bumped by every push (IXFR evictions, a
   * zone flush) and route change. A walk kept before a drop is not served after it.
   */
  readonly drops: () => number;
  /** Milliseconds, monotonic. */
  readonly now: () => number;
  /** Walks kept at most (the LRU's bound); 0 keeps none. */
  readonly maxEntries: number;
}

/** An asker's client map entry as kept: read once per TTL, not once per walk. */
interface KeptClient {
  /** null: the client map has no such address (an NXDOMAIN: a node, a hostNetwork pod). */
  readonly entry: ClientEntry | null;
  readonly expiresAtMs: number;
}

/** A walk's answer as kept: the template (every TTL the same) and where its TTLs are. */
interface KeptWalk {
  readonly wire: Buffer;
  readonly ttlOffsets: readonly number[];
  readonly ttlSeconds: number;
  readonly storedAtMs: number;
}

/** What is known of a name above a walk's steps (RFC 8020's cut), until `expiresAtMs`. */
interface KeptCut {
  readonly absent: boolean;
  readonly expiresAtMs: number;
}

/** A kept walk found for a question: its template, TTL fields and the seconds left to them. */
export interface KeptHit {
  readonly wire: Buffer;
  readonly ttlOffsets: readonly number[];
  readonly remainingSeconds: number;
}

/**
 * The answers autopath made, kept per asking namespace and question, so a warm walked lookup is
 * one read, not the walk again through cached steps. Apart from the cache: a pod of another
 * namespace asking `<name>.<ns>.svc.<zone>` by its full name must get the cluster's NXDOMAIN, so
 * the answer is never kept under the asked name where the cache would serve it to anyone; it is
 * looked up here only after the asker was found to be of `<ns>` with the default search path.
 *
 * Kept for the shortest TTL in the answer (as the cache keeps the steps), and dropped whole at the
 * cache's next drop: a walk reads several names of the cluster zone (each step's NXDOMAIN, the name
 * found), any of which a push may change, and each IXFR's evictions include the zone's apex, so
 * telling which walks a change touched would drop them all anyway.
 */
export class KeptWalks {
  private readonly walks?: LRUCache<string, KeptWalk>;
  private readonly clients?: LRUCache<string, KeptClient>;
  private readonly cuts?: LRUCache<string, KeptCut>;
  /** The cache's drop count everything kept was read or made under. */
  private seenDrops = -1;

  constructor(private readonly deps: KeptWalksDeps) {
    if (deps.maxEntries <= 0) return;
    this.walks = new LRUCache({ max: deps.maxEntries });
    this.clients = new LRUCache({ max: deps.maxEntries });
    this.cuts = new LRUCache({ max: deps.maxEntries });
  }

  /** Forgets everything kept once the cache has dropped anything since: one check for the three kinds. */
  private sync(): void {
    const drops = this.deps.drops();
    if (drops === this.seenDrops) return;
    this.walks?.clear();
    this.clients?.clear();
    this.cuts?.clear();
    this.seenDrops = drops;
  }

  /** Whether what was asked under `token` may be kept: nothing dropped since (then synced, so it is kept under it). */
  private keepable(token: number): boolean {
    if (this.walks === undefined || token !== this.deps.drops()) return false;
    this.sync();
    return true;
  }

  /**
   * What is known of a name above a walk's steps (RFC 8020's cut): 'absent' (an NXDOMAIN),
   * 'present' (NOERROR: it or names below it exist), each within its TTL since the cache's last
   * drop; 'unknown'; undefined when nothing is kept at all (then it is never asked to learn it).
   */
  cut(name: string): 'absent' | 'present' | 'unknown' | undefined {
    if (this.cuts === undefined) return undefined;
    this.sync();
    const known = this.cuts.get(name);
    if (known === undefined) return 'unknown';
    if (known.expiresAtMs > this.deps.now()) return known.absent ? 'absent' : 'present';
    this.cuts.delete(name);
    return 'unknown';
  }

  /** Keeps what `reply` says of `name` (NXDOMAIN or NOERROR) for its shortest TTL, unless the cache dropped something since `token`. */
  keepCut(name: string, reply: Reply, token: number): void {
    const rcode = replyRcode(reply);
    if ((rcode !== RCODE.NXDOMAIN && rcode !== RCODE.NOERROR) || !this.keepable(token)) return;
    const ttlSeconds = shortestTtl(reply as Buffer);
    if (ttlSeconds <= 0) return;
    this.cuts?.set(name, { absent: rcode === RCODE.NXDOMAIN, expiresAtMs: this.deps.now() + ttlSeconds * 1000 });
  }

  /**
   * The client map's entry for an address, as read last within its TTL and since the cache's last
   * drop (the client map is pushed like the rest of the zone), or undefined: read it again. Saves
   * each walk the question to the cache and the decoding of its TXT. null: known to be nobody's
   * (the map's NXDOMAIN, kept for its TTL): a node cache's steps to the Pod's forwarder have the
   * shape of first steps, and are not looked up each time.
   */
  client(address: string): ClientEntry | null | undefined {
    this.sync();
    const kept = this.clients?.get(address);
    if (kept === undefined) return undefined;
    if (kept.expiresAtMs <= this.deps.now()) {
      this.clients?.delete(address);
      return undefined;
    }
    return kept.entry;
  }

  /**
   * Keeps an address's entry as read (clientEntryOf), or that it has none when `reply` is the
   * map's NXDOMAIN, unless the cache dropped something since `token`.
   */
  keepClient(address: string, entry: ClientEntry | undefined, reply: Reply, token: number): void {
    if (!this.keepable(token)) return;
    const ttlSeconds = entry?.ttlSeconds ?? (replyRcode(reply) === RCODE.NXDOMAIN ? shortestTtl(reply as Buffer) : 0);
    if (!(ttlSeconds > 0)) return;
    this.clients?.set(address, { entry: entry ?? null, expiresAtMs: this.deps.now() + ttlSeconds * 1000 });
  }

  /** The key of a question walked for a pod of `namespace`: its name (lower case), type and DO bit (the cache's). */
  static keyOf(namespace: string, name: string, qtype: number, dnssecOk: boolean): string {
    return `${namespace}|${name}|${qtype}|${dnssecOk ? 1 : 0}`;
  }

  /** Taken before a walk's steps are asked: keep() with it keeps the answer only if nothing was dropped meanwhile. */
  token(): number {
    return this.deps.drops();
  }

  /** The kept answer for this key, or undefined: none, expired, or made before the cache's last drop. */
  get(key: string): KeptHit | undefined {
    this.sync();
    const kept = this.walks?.get(key);
    if (kept === undefined) return undefined;
    const remainingSeconds = kept.ttlSeconds - Math.floor((this.deps.now() - kept.storedAtMs) / 1000);
    if (remainingSeconds <= 0) {
      this.walks?.delete(key);
      return undefined;
    }
    return { wire: kept.wire, ttlOffsets: kept.ttlOffsets, remainingSeconds };
  }

  /**
   * Keeps a walk's answer (answerThroughSearch's template) under `key`, with every TTL set to its
   * shortest. Not when a drop came after `token` (a step may have been answered from the old
   * state), nor an answer of TTL 0.
   */
  keep(key: string, template: Buffer, token: number): void {
    if (!this.keepable(token)) return;
    const records = scanResponse(template).records;
    if (records.length === 0) return;
    const ttlSeconds = Math.min(...records.map((r) => r.ttl));
    if (ttlSeconds <= 0) return;
    const wire = Buffer.from(template);
    for (const r of records) wire.writeUInt32BE(ttlSeconds, r.ttlOffset);
    this.walks?.set(key, {
      wire,
      ttlOffsets: records.map((r) => r.ttlOffset),
      ttlSeconds,
      storedAtMs: this.deps.now(),
    });
  }

  get size(): number {
    return this.walks?.size ?? 0;
  }
}

/** The shortest TTL of a reply's records (OPT aside), 0 for none. */
function shortestTtl(reply: Buffer): number {
  const records = scanResponse(reply).records.filter((r) => r.type !== QTYPE.OPT);
  return records.length > 0 ? Math.min(...records.map((r) => r.ttl)) : 0;
}
