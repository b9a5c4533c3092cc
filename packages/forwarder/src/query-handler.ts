import type { Logger } from '@cluster-dns/runtime';
import {
  buildBareResponse,
  type DnsRequest,
  type Fqdn,
  finishFromTemplate,
  OPCODE,
  type ParsedQuery,
  QCLASS,
  QTYPE,
  type QueryHandler,
  RCODE,
  RCODE_MASK,
  type Reply,
} from '@cluster-dns/wire';
import {
  type CacheCounters,
  type CachedReply,
  type CachePolicy,
  cacheTtlOf,
  type ReplyCache,
  toCachedReply,
} from './cache.js';
import { answerStatsQuery, type StatsSnapshot } from './chaos-stats.js';
import type { Resolved } from './resolution.js';
import type { Route, RouteTable } from './route-table.js';
import type { UpstreamQuestion } from './upstream.js';

export interface QueryHandlerDeps {
  /** The routes in force now (a config reload swaps them). */
  routes(): RouteTable;
  cache: ReplyCache;
  counters: CacheCounters;
  policy: CachePolicy;
  /** Upstream queries in flight at most; past it, REFUSED at once. */
  forwardMax: number;
  /** Asks the route's servers: the only I/O, injected so the handler runs without sockets. */
  resolve(question: UpstreamQuestion): Promise<Resolved>;
  stats(): StatsSnapshot;
  /** True for a name we sent ourselves to detect a forwarding loop. */
  isLoopProbe(name: Fqdn): boolean;
  /** Push invalidation (zone-sync.ts): NOTIFY, which zones are pushed, and their eviction epochs. */
  push?: {
    notify(q: ParsedQuery, source: string): Promise<'accepted' | 'refused' | 'failed'>;
    isPushed(name: Fqdn): boolean;
    epochOf(name: Fqdn): number;
  };
  /** RFC 8767: whether this route's expired answers may be served when its servers fail. */
  staleAllowed?(route: Route): boolean;
  /** Prefetch an entry asked this many times once under a tenth of its TTL is left; 0 = never. */
  prefetchHits?: number;
  log: Logger;
  logQueries: boolean;
  now: () => number;
}

/** RFC 8767 §4: the TTL of a stale answer, the client response timer, and the failure recheck timer. */
export const STALE_ANSWER_TTL_SECONDS = 30;
export const STALE_CLIENT_TIMER_MS = 1800;
export const STALE_RECHECK_MS = 30_000;

export interface PushCounters {
  staleServed: number;
  prefetches: number;
  /** Queries that joined an identical upstream question already in flight. */
  coalesced: number;
  /** Queries refused because --dns-forward-max questions were in flight (CoreDNS's max_concurrent). */
  maxConcurrentRejects: number;
}

export interface ForwarderQueryHandler {
  handle: QueryHandler;
  readonly push: PushCounters;
  /** Distinct upstream questions in flight (identical queries share one). */
  inFlight(): number;
  /** Resolves when every upstream question now in flight has settled. */
  settled(): Promise<void>;
}

const cacheKeyOf = (q: ParsedQuery) => `${q.key}|${q.qtype}|${q.qclass}|${q.edns?.dnssecOk ? 1 : 0}`;

/**
 * What the forwarder does with a query that passed the pipeline: CHAOS statistics, a cache hit
 * (the cached bytes, with the remaining TTL, the asker's ID and case), or an upstream question
 * shared by every identical query in flight. No sockets here: `resolve` does the asking.
 */
export function createQueryHandler(deps: QueryHandlerDeps): ForwarderQueryHandler {
  const inflight = new Map<string, Promise<Buffer | undefined>>();
  const { cache, counters } = deps;

  const extra: PushCounters = { staleServed: 0, prefetches: 0, coalesced: 0, maxConcurrentRejects: 0 };
  /** Keys whose stale answer stands in for a failing upstream: not asked again before this time. */
  const recheckAfter = new Map<string, number>();

  const lookupUpstream = async (q: ParsedQuery, key: string): Promise<Buffer | undefined> => {
    // A zone change dropped while this was out may have been answered from the old state.
    const epoch = deps.push?.epochOf(q.key) ?? 0;
    try {
      const resolved = await deps.resolve({
        name: q.key,
        qtype: q.qtype,
        qclass: q.qclass,
        dnssecOk: q.edns?.dnssecOk ?? false,
        checkingDisabled: q.cd,
      });
      const pushed = deps.push?.isPushed(q.key) ?? false;
      // Pushed zones tell us when a name appears: their negative answers are safe to keep.
      const policy = pushed && !deps.policy.negativeCache ? { ...deps.policy, negativeCache: true } : deps.policy;
      const ttl = cacheTtlOf(resolved.wire, resolved.scanned, policy);
      recheckAfter.delete(key);
      if (ttl === undefined) return resolved.wire;
      // The asker of a miss gets the entry's own bytes: one TTL for every record, as hits will.
      const entry = toCachedReply(resolved.wire, resolved.scanned, ttl, resolved.route.id, deps.now());
      if (epoch === (deps.push?.epochOf(q.key) ?? 0)) cache.set(key, entry);
      return entry.wire;
    } catch (error) {
      deps.log.debug('upstream failure', { qname: q.key, qtype: q.qtype, err: error });
      return undefined;
    }
  };

  /** One upstream question per key, shared by every query that wants it. */
  const ask = (q: ParsedQuery, key: string): Promise<Buffer | undefined> | undefined => {
    let pending = inflight.get(key);
    if (pending) extra.coalesced++;
    else {
      if (inflight.size >= deps.forwardMax) {
        extra.maxConcurrentRejects++;
        return undefined;
      }
      pending = lookupUpstream(q, key).finally(() => inflight.delete(key));
      inflight.set(key, pending);
    }
    return pending;
  };

  const handle = (request: DnsRequest): Reply | Promise<Reply> => {
    const { query: q, context, limitBytes, udpPayloadBytes } = request;
    const bare = (rcode: number) => buildBareResponse(q, rcode, { recursionAvailable: true, udpPayloadBytes });
    const finish = (template: Buffer) => finishFromTemplate(template, q, limitBytes, { udpPayloadBytes });
    if (q.opcode === OPCODE.NOTIFY) {
      if (!deps.push || q.qtype !== QTYPE.SOA) return bare(RCODE.REFUSED);
      const push = deps.push;
      return push.notify(q, context.remoteAddress).then((result) => {
        if (result === 'refused') return bare(RCODE.REFUSED);
        // Answered once the changes are fetched and dropped; a failed fetch is retried by the sender.
        return result === 'accepted'
          ? buildBareResponse(q, RCODE.NOERROR, { authoritative: true })
          : bare(RCODE.SERVFAIL);
      });
    }
    if (q.qclass === QCLASS.CH) {
      const stats = q.qtype === QTYPE.TXT ? answerStatsQuery(q.key, q.qtype, deps.stats()) : undefined;
      return stats ? finish(stats) : bare(RCODE.REFUSED);
    }
    if (deps.isLoopProbe(q.key)) return bare(RCODE.REFUSED);
    const key = cacheKeyOf(q);
    const hit = cache.get(key);
    if (hit && !hit.stale) {
      counters.hits++;
      if (hit.entry.denial) counters.denialHits = (counters.denialHits ?? 0) + 1;
      hit.entry.hits++;
      if (deps.logQueries)
        deps.log.info('query', { qname: q.qname, qtype: q.qtype, from: context.remoteAddress, answer: 'cached' });
      const prefetchHits = deps.prefetchHits ?? 0;
      if (
        prefetchHits > 0 &&
        hit.entry.hits >= prefetchHits &&
        hit.remainingSeconds <= Math.max(1, Math.floor(hit.entry.ttlSeconds / 10)) &&
        !inflight.has(key)
      ) {
        extra.prefetches++;
        void ask(q, key);
      }
      return finishFromTemplate(hit.entry.wire, q, limitBytes, {
        ttlOffsets: hit.remainingSeconds === hit.entry.ttlSeconds ? undefined : hit.entry.ttlOffsets,
        ttlSeconds: hit.remainingSeconds,
        udpPayloadBytes,
      });
    }
    counters.misses++;
    const route = deps.routes().routeFor(q.key);
    if (deps.logQueries)
      deps.log.info('query', { qname: q.qname, qtype: q.qtype, from: context.remoteAddress, route: route.domain });
    if (route.kind === 'local') return bare(RCODE.NXDOMAIN);
    const stale = hit?.stale && deps.staleAllowed?.(route) ? hit.entry : undefined;
    const serveStale = () => {
      extra.staleServed++;
      return finishFromTemplate((stale as CachedReply).wire, q, limitBytes, {
        ttlOffsets: (stale as CachedReply).ttlOffsets,
        ttlSeconds: STALE_ANSWER_TTL_SECONDS,
        udpPayloadBytes,
      });
    };
    // The upstream failed lately: the stale answer stands until the recheck timer runs out.
    if (stale && (recheckAfter.get(key) ?? 0) > deps.now()) return serveStale();
    const pending = ask(q, key);
    if (!pending) return stale ? serveStale() : bare(RCODE.REFUSED);
    if (!stale) return pending.then((template) => (template ? finish(template) : bare(RCODE.SERVFAIL)));
    return new Promise<Reply>((resolve) => {
      let answered = false;
      const timer = setTimeout(() => {
        answered = true;
        resolve(serveStale());
      }, STALE_CLIENT_TIMER_MS);
      timer.unref();
      void pending.then((reply) => {
        clearTimeout(timer);
        // RFC 8767 §5: SERVFAIL and REFUSED from every server are failures too.
        const rcode = reply ? reply.readUInt16BE(2) & RCODE_MASK : RCODE.SERVFAIL;
        const template = rcode === RCODE.SERVFAIL || rcode === RCODE.REFUSED ? undefined : reply;
        if (!template) {
          if (recheckAfter.size > 10_000) recheckAfter.clear();
          recheckAfter.set(key, deps.now() + STALE_RECHECK_MS);
        }
        if (answered) return;
        resolve(template ? finish(template) : serveStale());
      });
    });
  };

  return {
    handle,
    push: extra,
    inFlight: () => inflight.size,
    settled: async () => {
      await Promise.allSettled([...inflight.values()]);
    },
  };
}
