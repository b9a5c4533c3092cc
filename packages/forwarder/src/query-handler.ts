import type { Logger } from '@cluster-dns/runtime';
import {
  buildBareResponse,
  type DnsRequest,
  type Fqdn,
  finishFromTemplate,
  type ParsedQuery,
  QCLASS,
  QTYPE,
  type QueryHandler,
  RCODE,
  type Reply,
} from '@cluster-dns/wire';
import { type CacheCounters, type CachePolicy, cacheTtlOf, type ReplyCache, toCachedReply } from './cache.js';
import { answerStatsQuery, type StatsSnapshot } from './chaos-stats.js';
import type { Resolved } from './resolution.js';
import type { RouteTable } from './route-table.js';
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
  log: Logger;
  logQueries: boolean;
  now: () => number;
}

export interface ForwarderQueryHandler {
  handle: QueryHandler;
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

  const lookupUpstream = async (q: ParsedQuery, key: string): Promise<Buffer | undefined> => {
    try {
      const resolved = await deps.resolve({
        name: q.key,
        qtype: q.qtype,
        qclass: q.qclass,
        dnssecOk: q.edns?.dnssecOk ?? false,
        checkingDisabled: q.cd,
      });
      const ttl = cacheTtlOf(resolved.wire, resolved.scanned, deps.policy);
      if (ttl !== undefined)
        cache.set(key, toCachedReply(resolved.wire, resolved.scanned, ttl, resolved.route.id, deps.now()));
      return resolved.wire;
    } catch (error) {
      deps.log.debug('upstream failure', { qname: q.key, qtype: q.qtype, err: error });
      return undefined;
    }
  };

  const handle = (request: DnsRequest): Reply | Promise<Reply> => {
    const { query: q, context, limitBytes, udpPayloadBytes } = request;
    const bare = (rcode: number) => buildBareResponse(q, rcode, { recursionAvailable: true, udpPayloadBytes });
    const finish = (template: Buffer) => finishFromTemplate(template, q, limitBytes, { udpPayloadBytes });
    if (q.qclass === QCLASS.CH) {
      const stats = q.qtype === QTYPE.TXT ? answerStatsQuery(q.key, q.qtype, deps.stats()) : undefined;
      return stats ? finish(stats) : bare(RCODE.REFUSED);
    }
    if (deps.isLoopProbe(q.key)) return bare(RCODE.REFUSED);
    const key = cacheKeyOf(q);
    const hit = cache.get(key);
    if (hit) {
      counters.hits++;
      if (deps.logQueries)
        deps.log.info('query', { qname: q.qname, qtype: q.qtype, from: context.remoteAddress, answer: 'cached' });
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
    let pending = inflight.get(key);
    if (!pending) {
      if (inflight.size >= deps.forwardMax) return bare(RCODE.REFUSED);
      pending = lookupUpstream(q, key).finally(() => inflight.delete(key));
      inflight.set(key, pending);
    }
    return pending.then((template) => (template ? finish(template) : bare(RCODE.SERVFAIL)));
  };

  return {
    handle,
    inFlight: () => inflight.size,
    settled: async () => {
      await Promise.allSettled([...inflight.values()]);
    },
  };
}
