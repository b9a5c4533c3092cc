import type { Buffer } from 'node:buffer';
import { HEADER_BYTES, type ParsedQuery, questionOctetsOf, sameNameOctets } from '@cluster-dns/wire';
import { LRUCache } from 'lru-cache';

/** kube-dns's split of its metrics: the cluster zone (auth) or a reverse zone. */
export type ZoneSystem = 'auth' | 'reverse';

export interface Entry {
  /** The LRU's key: name, type and class as text, made once when the answer is kept. */
  readonly key: string;
  readonly wire: Buffer;
  readonly owners: readonly string[];
  readonly stable: boolean;
  readonly nameHash: number;
  readonly qtype: number;
  readonly qclass: number;
  /** Where the template's question name ends: its octets are compared with the query's. */
  readonly nameEnd: number;
  /** The template's question octets (canonical name, type, class) as a latin1 string: the express lane's key. */
  readonly questionOctets: string;
  /** Which kind of zone the name is in, for the lane's metrics. */
  readonly system: ZoneSystem;
  /** `insertions` when the entry was last moved to the LRU's newest end. */
  mark: number;
}

/**
 * What an entry costs beyond its bytes and strings: the entry, the LRU's bookkeeping, its slots in
 * the hash and octets indexes.
 */
const ENTRY_OVERHEAD_BYTES = 200;

/** Entries kept on one question hash: names picked to collide cost a few compares, not a scan. */
export const MAX_SAME_HASH = 8;

/**
 * Ready-to-send answers (templates: ID 0, canonical question, no OPT), bounded by bytes, least
 * recently used out first. Each is tagged with the Services it was built from, so a change drops
 * exactly those; volatile ones (negative answers, the apex) go on any change.
 *
 * A query finds its answer by the question's hash and an octet compare with the template's own
 * question (as the forwarder's cache does): every query asks, and a hit makes no string.
 */
export class AnswerCache {
  private readonly byOwner = new Map<string, Set<string>>();
  private readonly volatile = new Set<string>();
  private readonly byQuestion = new Map<number, Entry[]>();
  /**
   * Entries by their question's octets (questionOctets): a query asked in canonical case, nearly
   * every one, is found by a string V8 hashes and compares natively (findByOctets, the lane's).
   */
  private readonly byQuestionOctets = new Map<string, Entry>();
  private readonly lru: LRUCache<string, Entry>;
  private insertions = 0;

  constructor(readonly maxBytes: number) {
    this.lru = new LRUCache<string, Entry>({
      maxSize: Math.max(maxBytes, 1024),
      sizeCalculation: (entry, key) =>
        entry.wire.length + key.length * 2 + entry.questionOctets.length + ENTRY_OVERHEAD_BYTES,
      dispose: (entry, key) => this.untag(key, entry),
    });
  }

  get size(): number {
    return this.lru.size;
  }

  get bytes(): number {
    return this.lru.calculatedSize;
  }

  /** The template answering this question, or undefined. */
  get(q: ParsedQuery): Buffer | undefined {
    const candidates = this.byQuestion.get(q.nameHash);
    if (candidates === undefined) return undefined;
    const nameEnd = q.questionEnd - 4;
    for (const entry of candidates) {
      if (entry.qtype !== q.qtype || entry.qclass !== q.qclass || entry.nameEnd !== nameEnd) continue;
      if (!sameNameOctets(entry.wire, q.raw, HEADER_BYTES, nameEnd)) continue;
      this.touch(entry);
      return entry.wire;
    }
    return undefined;
  }

  /** The entry whose question is exactly these octets (as latin1), or undefined: get() for an express lane. */
  findByOctets(questionOctets: string): Entry | undefined {
    const entry = this.byQuestionOctets.get(questionOctets);
    if (entry !== undefined) this.touch(entry);
    return entry;
  }

  /** A hit: the entry counts as used. */
  private touch(entry: Entry): void {
    // Moved to the LRU's newest end only once an eighth of the cache's entries came in since it
    // last was (memcached's bump rule, as the forwarder's cache): until then it is among the
    // newest anyway, and lru-cache's get costs more than the rest of a hit (an options object
    // made per call, the list moves).
    if (this.insertions - entry.mark >= Math.max(1, this.lru.size >> 3)) {
      this.lru.get(entry.key);
      entry.mark = this.insertions;
    }
  }

  /** Keeps `wire`, the template answering `q` (its question written from `q.key`). */
  set(q: ParsedQuery, wire: Buffer, owners: readonly string[], stable: boolean, system: ZoneSystem = 'auth'): void {
    const key = `${q.key}|${q.qtype}|${q.qclass}`;
    const entry: Entry = {
      key,
      wire,
      owners,
      stable,
      nameHash: q.nameHash,
      qtype: q.qtype,
      qclass: q.qclass,
      nameEnd: q.questionEnd - 4,
      questionOctets: questionOctetsOf(wire, q.questionEnd),
      system,
      mark: ++this.insertions,
    };
    this.lru.set(key, entry);
    if (this.lru.peek(key) !== entry) return;
    const sameHash = this.byQuestion.get(entry.nameHash);
    if (sameHash === undefined) this.byQuestion.set(entry.nameHash, [entry]);
    else {
      // The oldest on a full hash makes room (its dispose takes it off the list).
      if (sameHash.length >= MAX_SAME_HASH) this.lru.delete((sameHash[0] as Entry).key);
      sameHash.push(entry);
    }
    this.byQuestionOctets.set(entry.questionOctets, entry);
    if (!stable) this.volatile.add(key);
    for (const owner of owners) {
      let keys = this.byOwner.get(owner);
      if (!keys) {
        keys = new Set();
        this.byOwner.set(owner, keys);
      }
      keys.add(key);
    }
  }

  /** Drops the answers built from these Services, and every volatile one. */
  invalidate(owners: readonly string[]): void {
    for (const owner of owners) {
      const keys = this.byOwner.get(owner);
      if (keys) for (const key of [...keys]) this.lru.delete(key);
    }
    for (const key of [...this.volatile]) this.lru.delete(key);
  }

  private untag(key: string, entry: Entry): void {
    const sameHash = this.byQuestion.get(entry.nameHash);
    if (sameHash) {
      const at = sameHash.indexOf(entry);
      if (at >= 0) sameHash.splice(at, 1);
      if (sameHash.length === 0) this.byQuestion.delete(entry.nameHash);
    }
    if (this.byQuestionOctets.get(entry.questionOctets) === entry) this.byQuestionOctets.delete(entry.questionOctets);
    if (!entry.stable) this.volatile.delete(key);
    for (const owner of entry.owners) {
      const keys = this.byOwner.get(owner);
      keys?.delete(key);
      if (keys?.size === 0) this.byOwner.delete(owner);
    }
  }
}
