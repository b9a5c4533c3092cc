import { CloseStack, type Logger, parseKubeDnsConfig, sleep } from '@cluster-dns/runtime';
import {
  buildBareResponse,
  buildFormatErrorResponse,
  createUdpPool,
  type DnsListener,
  type Fqdn,
  finishFromTemplate,
  listenDns,
  maxResponseBytes,
  type ParsedQuery,
  parseQuery,
  QCLASS,
  QTYPE,
  type QueryContext,
  QueryFormatError,
  RCODE,
  type Reply,
} from '@cluster-dns/wire';
import { type CacheCounters, cacheTtlOf, ReplyCache, toCachedReply } from './cache.js';
import { answerStatsQuery } from './chaos-stats.js';
import { readConfigSources } from './config-source.js';
import { createLoopDetector } from './loop-detect.js';
import type { ForwarderOptions } from './options.js';
import { resolveQuestion } from './resolution.js';
import { RouteTable, serverText } from './route-table.js';
import type { ServerCounters } from './upstream.js';

export const VERSION = 'cluster-dns-forwarder-0.1.0';

export interface ForwarderDeps {
  log: Logger;
  now?: () => number;
}

export interface Forwarder {
  start(): Promise<{ port: number; addresses: string[] }>;
  shutdown(): Promise<void>;
  /** Re-reads --config-dir and --resolv-file now (the poll does this on its own). */
  reloadConfig(): Promise<void>;
  readonly counters: CacheCounters;
  /** Upstream replies dropped for a wrong source, ID or question. */
  rejectedReplies(): number;
  /** Probes every upstream for a forwarding loop now (start and config changes do it with --dns-loop-detect). */
  detectLoops(): Promise<void>;
  /** Upstreams disabled because they loop back to us. */
  disabledServers(): string[];
}

/** The dnsmasq container: cache, stub domains, upstreams. Building it does no I/O. */
export function createForwarder(options: ForwarderOptions, deps: ForwarderDeps): Forwarder {
  const { log } = deps;
  const now = deps.now ?? Date.now;
  const counters: CacheCounters = { hits: 0, misses: 0, insertions: 0, evictions: 0 };
  const cache = new ReplyCache(options.cacheSize, counters, now);
  const serverCounters = new Map<string, ServerCounters>();
  const disabled = new Set<string>();
  const inflight = new Map<string, Promise<Buffer | undefined>>();
  const closers = new CloseStack();
  const rejectedLogged = new Set<string>();
  let routes = new RouteTable({
    rules: options.rules,
    stubDomains: new Map(),
    upstreamNameservers: [],
    resolvConf: [],
  });
  let configVersion = '';
  let draining = false;
  let rejectedReplies = 0;
  const loops = createLoopDetector({ log, disabled });

  const udpPool = createUdpPool();
  const forwardOptions = {
    exchangeUdp: udpPool.exchange,
    timeoutMs: options.upstreamTimeoutMs,
    deadlineMs: options.forwardDeadlineMs,
    counters: serverCounters,
    disabled,
    onRejected: (server: string, reason: string) => {
      const key = `${server}/${reason}`;
      if (!rejectedLogged.has(key)) {
        rejectedLogged.add(key);
        log.warn('dropped a reply that does not match its query (possible spoofing)', { server, reason });
      }
      rejectedReplies++;
    },
  };

  const cacheKey = (q: ParsedQuery) => `${q.key}|${q.qtype}|${q.qclass}|${q.edns?.dnssecOk ? 1 : 0}`;

  const finish = (template: Buffer, q: ParsedQuery, context: QueryContext): Buffer =>
    finishFromTemplate(template, q, maxResponseBytes(q, context.transport));

  const lookupUpstream = async (q: ParsedQuery, key: string): Promise<Buffer | undefined> => {
    try {
      const resolved = await resolveQuestion(
        routes,
        { name: q.key, qtype: q.qtype, qclass: q.qclass, dnssecOk: q.edns?.dnssecOk ?? false, checkingDisabled: q.cd },
        forwardOptions,
      );
      const ttl = cacheTtlOf(resolved.wire, resolved.scanned, options);
      if (ttl !== undefined)
        cache.set(key, toCachedReply(resolved.wire, resolved.scanned, ttl, resolved.route.id, now()));
      return resolved.wire;
    } catch (error) {
      log.debug('upstream failure', { qname: q.key, qtype: q.qtype, err: error });
      return undefined;
    }
  };

  const handle = (raw: Buffer, context: QueryContext): Reply | Promise<Reply> => {
    let q: ParsedQuery;
    try {
      q = parseQuery(raw);
    } catch (error) {
      if (!(error instanceof QueryFormatError)) throw error;
      return error.headerReadable ? buildFormatErrorResponse(raw) : undefined;
    }
    if (q.opcode !== 0) return buildBareResponse(q, RCODE.NOTIMP, { recursionAvailable: true });
    if (q.edns && q.edns.version > 0) return buildBareResponse(q, RCODE.BADVERS, { recursionAvailable: true });
    if (q.qclass === QCLASS.CH) {
      const stats = q.qtype === QTYPE.TXT ? answerStatsQuery(q, snapshot()) : undefined;
      return stats ?? buildBareResponse(q, RCODE.REFUSED, { recursionAvailable: true });
    }
    if (loops.isProbe(q.key)) return buildBareResponse(q, RCODE.REFUSED);
    const key = cacheKey(q);
    const hit = cache.get(key);
    if (hit) {
      counters.hits++;
      if (options.logQueries)
        log.info('query', { qname: q.qname, qtype: q.qtype, from: context.remoteAddress, answer: 'cached' });
      // One copy: the remaining TTL patched in, and AA cleared: our cache is not authoritative
      // (RFC 1035 §6.1.3), as dnsmasq marks it.
      return finishFromTemplate(hit.entry.wire, q, maxResponseBytes(q, context.transport), {
        ttlOffsets: hit.remainingSeconds === hit.entry.ttlSeconds ? undefined : hit.entry.ttlOffsets,
        ttlSeconds: hit.remainingSeconds,
        clearAuthoritative: true,
      });
    }
    counters.misses++;
    const route = routes.routeFor(q.key);
    if (options.logQueries)
      log.info('query', { qname: q.qname, qtype: q.qtype, from: context.remoteAddress, route: route.domain });
    if (route.kind === 'local') return buildBareResponse(q, RCODE.NXDOMAIN, { recursionAvailable: true });
    let pending = inflight.get(key);
    if (!pending) {
      if (inflight.size >= options.forwardMax) return buildBareResponse(q, RCODE.REFUSED, { recursionAvailable: true });
      pending = lookupUpstream(q, key).finally(() => inflight.delete(key));
      inflight.set(key, pending);
    }
    return pending.then((template) =>
      template ? finish(template, q, context) : buildBareResponse(q, RCODE.SERVFAIL, { recursionAvailable: true }),
    );
  };

  const snapshot = () => ({
    cachesize: options.cacheSize,
    ...counters,
    auth: 0,
    servers: routes.servers().map((s) => {
      const c = serverCounters.get(serverText(s)) ?? { queries: 0, failures: 0 };
      return `${serverText(s)} ${c.queries} ${c.failures}`;
    }),
    version: VERSION,
  });

  const reloadConfig = async () => {
    let raw: Awaited<ReturnType<typeof readConfigSources>>;
    try {
      raw = await readConfigSources(options.configDir, options.resolvFile);
    } catch (error) {
      log.error('cannot read the config; keeping the last good one', { err: error, configDir: options.configDir });
      return;
    }
    if (raw.version === configVersion) return;
    configVersion = raw.version;
    let next: RouteTable;
    try {
      const config = parseKubeDnsConfig(raw.data);
      next = new RouteTable({
        rules: options.rules,
        stubDomains: config.stubDomains,
        upstreamNameservers: config.upstreamNameservers,
        resolvConf: raw.resolvConf,
      });
    } catch (error) {
      log.error('invalid config; keeping the last good one', {
        err: error,
        configDir: options.configDir,
        version: raw.version,
      });
      return;
    }
    routes = next;
    const dropped = cache.dropStale((key) => next.routeFor(key.slice(0, key.indexOf('|')) as Fqdn).id);
    log.info('config applied', { version: raw.version, routes: next.describe(), cacheEntriesDropped: dropped });
    if (options.loopDetect)
      void loops.check(
        next.servers(),
        listeners.map((l) => ({ host: l.host, port: l.port })),
      );
  };

  const listeners: DnsListener[] = [];
  return {
    counters,
    reloadConfig,
    rejectedReplies: () => rejectedReplies,
    detectLoops: () =>
      loops.check(
        routes.servers(),
        listeners.map((l) => ({ host: l.host, port: l.port })),
      ),
    disabledServers: () => [...disabled],
    async start() {
      await reloadConfig();
      for (const host of options.listenAddresses) {
        const listener = await listenDns({
          host,
          port: listeners[0]?.port ?? options.port,
          handler: handle,
          tcpIdleTimeoutMs: options.tcpIdleTimeoutMs,
          maxTcpConnections: options.maxTcpConnections,
          onHandlerError: (error) => log.error('query handler failed', { err: error }),
        });
        listeners.push(listener);
        closers.push(`dns ${host}`, () => listener.close());
      }
      const poll = setInterval(() => void reloadConfig(), options.configPollMs);
      poll.unref();
      closers.push('config poll', () => clearInterval(poll));
      if (options.loopDetect)
        await loops.check(
          routes.servers(),
          listeners.map((l) => ({ host: l.host, port: l.port })),
        );
      const port = listeners[0]?.port ?? 0;
      log.info('ready', {
        port,
        addresses: options.listenAddresses,
        cacheSize: options.cacheSize,
        routes: routes.describe(),
      });
      return { port, addresses: [...options.listenAddresses] };
    },
    async shutdown() {
      if (!draining) {
        draining = true;
        log.info('lameduck: still answering', { lameduckMs: options.lameduckMs });
        await sleep(options.lameduckMs);
      }
      await closers.close(log);
      // In-flight upstream queries end by their own deadline; wait for them, bounded by it.
      await Promise.race([Promise.allSettled([...inflight.values()]), sleep(options.forwardDeadlineMs)]);
      udpPool.close();
    },
  };
}
