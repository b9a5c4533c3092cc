import { Buffer } from 'node:buffer';
import type { Logger } from '@cluster-dns/runtime';
import {
  answerPlainQuery,
  buildBareResponse,
  copyWithoutOpt,
  type Fqdn,
  finishFromTemplate,
  type Next,
  type PlainQuestion,
  RCODE,
  RCODE_MASK,
  type Reply,
  type Stage,
  scanResponse,
  turnRecords,
} from '@cluster-dns/wire';
import type { ForwarderRequest } from '../../config/forwarder-request.js';
import type { RouteKind } from '../../config/route-table.js';
import {
  type AnswerCache,
  type CachedAnswer,
  type CacheHit,
  type CachePolicy,
  cacheIdOf,
  cacheKeyOf,
  cacheTtlOf,
  toCachedReply,
} from './cache.js';

/** RFC 8767 §4: the TTL of a stale answer, the client response timer, and the failure recheck timer. */
export const STALE_ANSWER_TTL_SECONDS = 30;
export const STALE_CLIENT_TIMER_MS = 1800;
export const STALE_RECHECK_MS = 30_000;

export interface CacheStageDeps {
  cache: AnswerCache;
  policy: CachePolicy;
  /** Push invalidation (zone-sync.ts): which zones are pushed (their denials are kept). */
  push?: {
    isPushed(name: Fqdn): boolean;
  };
  /** RFC 8767: whether expired answers of this kind of route may be served when its servers fail. */
  staleAllowed(kind: RouteKind): boolean;
  /** Prefetch an entry asked this many times once under a tenth of its TTL is left; 0 = never. */
  prefetchHits: number;
  log: Logger;
  logQueries: boolean;
  now(): number;
}

/** What the cache stage counts (dnsmasq's and CoreDNS's cache statistics, and its own). */
export interface CacheStageCounts {
  hits: number;
  /** Of the hits, those that served a denial (NXDOMAIN, NODATA). */
  denialHits: number;
  misses: number;
  staleServed: number;
  prefetches: number;
  /** Queries that joined an identical question already in flight upstream. */
  coalesced: number;
}

/** How a question in flight ended: the template every query that asked it is answered from, or its rcode. */
interface Outcome {
  template: Buffer | undefined;
  rcode: number;
}

/**
 * The cache in front of the forward stage. A fresh entry is answered at once, synchronously: its
 * bytes with the asker's ID, case and OPT and the TTL that remains. A miss asks the next stage once
 * per question, however many identical queries join it meanwhile, and keeps what comes back by
 * RFC 2308's and the flags' rules (in a pushed zone, denials too). An entry asked often is fetched
 * again just before it expires (prefetch). When the upstreams fail, an expired entry may be served
 * (RFC 8767), after the client response timer if the upstreams are merely slow.
 */
export class CacheStage implements Stage<ForwarderRequest> {
  readonly name = 'cache';
  readonly counts: CacheStageCounts = {
    hits: 0,
    denialHits: 0,
    misses: 0,
    staleServed: 0,
    prefetches: 0,
    coalesced: 0,
  };
  private readonly inflight = new Map<string, Promise<Outcome>>();
  /** Questions whose stale answer stands in for a failing upstream: not asked again before this time. */
  private readonly recheckAfter = new Map<string, number>();

  constructor(private readonly deps: CacheStageDeps) {}

  serve(request: ForwarderRequest, next: Next<ForwarderRequest>): Reply | Promise<Reply> {
    const q = request.query;
    const hit = this.deps.cache.lookup(q);
    const id = cacheIdOf(q);
    if (hit === undefined || hit.stale) return this.miss(request, id, hit, next);
    const { entry } = hit;
    this.countHit(entry);
    if (this.deps.logQueries)
      this.deps.log.info('query', {
        qname: q.qname,
        qtype: q.qtype,
        from: request.context.remoteAddress,
        answer: 'cached',
      });
    if (this.prefetchWindow(entry, hit.remainingSeconds) && !this.inflight.has(id)) {
      this.counts.prefetches++;
      void this.ask(request, id, next);
    }
    return this.replyFromHit(request, hit);
  }

  /** The reply to a query from a fresh entry: its bytes, the remaining TTL, turned if its route says. */
  private replyFromHit(request: ForwarderRequest, hit: CacheHit): Buffer {
    const { entry } = hit;
    const reply = finishFromTemplate(entry.wire, request.query, request.limitBytes, {
      ttlOffsets: hit.remainingSeconds === entry.ttlSeconds ? undefined : entry.ttlOffsets,
      ttlSeconds: hit.remainingSeconds,
      udpPayloadBytes: request.udpPayloadBytes,
    });
    return entry.turn ? turnRecords(reply, entry.turn, this.turns++) : reply;
  }

  /** How many answers have been turned: each starts one record further on (loadbalance). */
  private turns = 0;

  /**
   * The express lane's half (hit-lane.ts): the reply serve() would make for a plain query whose
   * fresh entry is here, made from the query's octets, or undefined — absent, expired (serve-stale
   * decides), in its prefetch window (serve starts the prefetch) or overwritten by another worker
   * while it was read (a shared store) — for the whole way through the chain.
   */
  hitAtOnce(raw: Buffer, q: PlainQuestion, udpPayloadBytes: number): Buffer | undefined {
    const { cache } = this.deps;
    const entry = cache.findPlain(raw, q);
    if (entry === undefined) return undefined;
    const remaining = cache.remainingSeconds(entry);
    if (remaining <= 0 || this.prefetchWindow(entry, remaining)) return undefined;
    const reply = answerPlainQuery(
      entry.wire,
      raw,
      q,
      udpPayloadBytes,
      remaining === entry.ttlSeconds ? undefined : entry.ttlOffsets,
      remaining,
      cache.askedCase,
    );
    if (!cache.confirm(entry)) return undefined;
    this.countHit(entry);
    return entry.turn ? turnRecords(reply, entry.turn, this.turns++) : reply;
  }

  private countHit(entry: CachedAnswer): void {
    this.counts.hits++;
    if (entry.denial) this.counts.denialHits++;
    this.deps.cache.countHit(entry);
  }

  /** Asked often enough, and little enough TTL left, for a prefetch (unless one is out already). */
  private prefetchWindow(entry: CachedAnswer, remainingSeconds: number): boolean {
    const { prefetchHits } = this.deps;
    return prefetchHits > 0 && entry.hits >= prefetchHits && remainingSeconds <= entry.prefetchBelowSeconds;
  }

  private miss(
    request: ForwarderRequest,
    id: string,
    hit: CacheHit | undefined,
    next: Next<ForwarderRequest>,
  ): Reply | Promise<Reply> {
    this.counts.misses++;
    const stale = hit?.stale && this.deps.staleAllowed(hit.entry.routeKind) ? hit.entry : undefined;
    // The upstream failed lately: the stale answer stands until the recheck timer runs out.
    if (stale && (this.recheckAfter.get(id) ?? 0) > this.deps.now()) return this.serveStale(request, stale);
    let pending = this.inflight.get(id);
    if (pending) this.counts.coalesced++;
    else {
      const asked = this.ask(request, id, next);
      // Answered at once (REFUSED past --dns-forward-max, NXDOMAIN of a local route): nobody joins.
      if (!(asked instanceof Promise)) {
        const refused = Buffer.isBuffer(asked) && (asked.readUInt16BE(2) & RCODE_MASK) === RCODE.REFUSED;
        return stale && refused ? this.serveStale(request, stale) : asked;
      }
      pending = asked;
    }
    if (!stale) return pending.then((outcome) => this.replyFrom(request, outcome));
    return this.raceStale(request, id, stale, pending);
  }

  /**
   * Asks the next stage and keeps what it resolved. A reply the next stage has at hand (it asked
   * nobody) is returned as it is; a question in flight is shared by every query that wants it.
   */
  private ask(request: ForwarderRequest, id: string, next: Next<ForwarderRequest>): Reply | Promise<Outcome> {
    const q = request.query;
    // A zone change dropped while this was out may have been answered from the old state: the
    // cache keeps it only if nothing was dropped meanwhile.
    const token = this.deps.cache.writeToken();
    request.repliesFromResolved = true;
    const replied = next(request);
    if (!(replied instanceof Promise)) return replied;
    const outcome = replied
      .then((reply): Outcome => {
        const resolved = request.resolved;
        if (!resolved) {
          // Answered after the cache without an upstream (a template's CNAME looked up, a zone
          // file's chain finished elsewhere): not kept, but every asker of the question gets it.
          const answered = Buffer.isBuffer(reply) && reply.length >= 12 ? reply : undefined;
          return {
            template: answered ? copyWithoutOpt(answered, scanResponse(answered)).wire : undefined,
            rcode: answered ? answered.readUInt16BE(2) & RCODE_MASK : RCODE.SERVFAIL,
          };
        }
        // Pushed zones tell us when a name appears: their negative answers are safe to keep.
        const pushed = this.deps.push?.isPushed(q.key) ?? false;
        // A route may keep its own policy (node-local mode's per-block `cache`), or none at all.
        const own = resolved.route.cache;
        if (own === 'off' || resolved.personal) return { template: resolved.wire, rcode: resolved.scanned.rcode };
        const base = own ?? this.deps.policy;
        const policy = pushed && !base.negativeCache ? { ...base, negativeCache: true } : base;
        const ttl = cacheTtlOf(resolved.wire, resolved.scanned, policy);
        if (ttl === undefined) return { template: resolved.wire, rcode: resolved.scanned.rcode };
        // Every asker, this one too, gets the entry's own bytes: one TTL for every record, as hits will.
        const entry = toCachedReply(
          cacheKeyOf(q),
          resolved.wire,
          resolved.scanned,
          ttl,
          resolved.route,
          this.deps.now(),
          resolved.fromNames,
        );
        this.deps.cache.set(entry, token);
        return { template: entry.wire, rcode: resolved.scanned.rcode };
      })
      .finally(() => this.inflight.delete(id));
    this.inflight.set(id, outcome);
    return outcome;
  }

  private replyFrom(request: ForwarderRequest, outcome: Outcome): Buffer {
    const q = request.query;
    if (outcome.template)
      return finishFromTemplate(outcome.template, q, request.limitBytes, { udpPayloadBytes: request.udpPayloadBytes });
    return buildBareResponse(q, outcome.rcode, { recursionAvailable: true, udpPayloadBytes: request.udpPayloadBytes });
  }

  private serveStale(request: ForwarderRequest, stale: CachedAnswer): Buffer {
    this.counts.staleServed++;
    return finishFromTemplate(stale.wire, request.query, request.limitBytes, {
      ttlOffsets: stale.ttlOffsets,
      ttlSeconds: STALE_ANSWER_TTL_SECONDS,
      udpPayloadBytes: request.udpPayloadBytes,
    });
  }

  /**
   * RFC 8767 §5: the fresh answer if it comes within the client response timer; else the stale one
   * at the timer. A failure (no answer, SERVFAIL or REFUSED from every server) serves the stale
   * answer and holds it for the recheck time.
   */
  private raceStale(request: ForwarderRequest, id: string, stale: CachedAnswer, pending: Promise<Outcome>) {
    return new Promise<Reply>((resolve) => {
      let answered = false;
      const timer = setTimeout(() => {
        answered = true;
        resolve(this.serveStale(request, stale));
      }, STALE_CLIENT_TIMER_MS);
      timer.unref();
      void pending.then((outcome) => {
        clearTimeout(timer);
        const failed = !outcome.template || outcome.rcode === RCODE.SERVFAIL || outcome.rcode === RCODE.REFUSED;
        if (failed) {
          if (this.recheckAfter.size > 10_000) this.recheckAfter.clear();
          this.recheckAfter.set(id, this.deps.now() + STALE_RECHECK_MS);
        } else this.recheckAfter.delete(id);
        if (answered) return;
        resolve(failed ? this.serveStale(request, stale) : this.replyFrom(request, outcome));
      });
    });
  }
}
