import { CloseStack, FlagError, type Logger, listenHttp, sleep } from '@cluster-dns/runtime';
import {
  buildIxfrQuery,
  createQueryPipeline,
  createUdpPool,
  type DnsListener,
  type Fqdn,
  listenDns,
  OPCODE,
  QCLASS,
  QTYPE,
  queryDns,
  type Rejection,
  randomQueryId,
  transferTcp,
  ZoneChangeReader,
  ZoneTransferError,
} from '@cluster-dns/wire';
import { Registry } from 'prom-client';
import { type CacheCounters, ReplyCache } from './cache.js';
import { createConfigReloader } from './config-reloader.js';
import { readConfigSources } from './config-source.js';
import { createLoopDetector } from './loop-detect.js';
import { createForwarderMetrics } from './metrics.js';
import type { ForwarderOptions } from './options.js';
import { createQueryHandler } from './query-handler.js';
import { resolveQuestion } from './resolution.js';
import { serverText } from './route-table.js';
import { createSelfCheck } from './self-address.js';
import type { ServerCounters } from './upstream.js';
import { createZoneSync } from './zone-sync.js';

export const VERSION = 'cluster-dns-forwarder-0.1.0';

export interface ForwarderDeps {
  log: Logger;
  now?: () => number;
}

export interface Forwarder {
  start(): Promise<{ port: number; addresses: string[]; metricsPort: number }>;
  /** Lameduck (still answering), then drain: every query in flight is answered before the sockets close. */
  shutdown(): Promise<void>;
  /** Re-reads --config-dir and --resolv-file now (the poll does this on its own). */
  reloadConfig(): Promise<void>;
  readonly counters: CacheCounters;
  /** Messages the query pipeline answered or dropped itself, by reason. */
  readonly rejected: Readonly<Partial<Record<Rejection, number>>>;
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
  const rejected: Partial<Record<Rejection, number>> = {};
  const cache = new ReplyCache(options.cacheSize, counters, now, options.maxStaleSeconds);
  const registry = new Registry();
  const serverCounters = new Map<string, ServerCounters>();
  const disabled = new Set<string>();
  const closers = new CloseStack();
  const listeners: DnsListener[] = [];
  const rejectedLogged = new Set<string>();
  let rejectedReplies = 0;
  const rejectedByReason = new Map<string, number>();
  let draining = false;
  const loops = createLoopDetector({ log, disabled });
  // Forged replies that match nothing of ours (a spray at our ports) are counted with the rest.
  const udpPool = createUdpPool({ onStray: () => forwardOptions.onRejected('unknown', 'stray') });
  const boundPort = () => (options.port !== 0 ? options.port : (listeners[0]?.port ?? 0));
  const isSelf = createSelfCheck(options.listenAddresses, boundPort);

  const config = createConfigReloader({
    read: () => readConfigSources(options.configDir, options.resolvFile),
    rules: options.rules,
    log,
    isSelf,
    onApplied: (next) => {
      // Cached answers of routes that did not change stay valid.
      const dropped = cache.dropStale((key) => next.routeFor(key.slice(0, key.indexOf('|')) as Fqdn).id);
      if (options.loopDetect && listeners.length > 0) void loops.check(next.servers());
      return { cacheEntriesDropped: dropped };
    },
  });

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
      rejectedByReason.set(reason, (rejectedByReason.get(reason) ?? 0) + 1);
    },
    onTry: (server: string, rcode: number | undefined, seconds: number) => metrics.upstreamTry(server, rcode, seconds),
  };

  const serverOf = (zone: Fqdn) => config.routes().routeFor(zone);
  const zoneSync = createZoneSync({
    serverFor: (zone) => {
      const route = serverOf(zone);
      return route.kind === 'local' ? undefined : route.servers[0];
    },
    allowedSources: (zone) => serverOf(zone).servers.map((s) => s.host),
    transfer: async (server, zone, serial) => {
      const reader = new ZoneChangeReader();
      await transferTcp(server, buildIxfrQuery(randomQueryId(), zone, serial), {
        timeoutMs: options.forwardDeadlineMs,
        onMessage: (m) => reader.push(m),
      });
      if (!reader.result) throw new ZoneTransferError(`IXFR of ${zone} from ${serverText(server)} ended early`);
      return reader.result;
    },
    soaSerial: async (server, zone) => {
      const reply = await queryDns(server, zone, QTYPE.SOA, { timeoutMs: options.upstreamTimeoutMs, rd: false });
      const serial = reply.answers.find((r) => r.type === QTYPE.SOA)?.soa?.serial;
      if (serial === undefined) throw new ZoneTransferError(`${serverText(server)} gave no SOA for ${zone}`);
      return serial;
    },
    evictNames: (names) => cache.evictNames(names),
    flushZone: (zone) => cache.flushZone(zone),
    log,
    hooks: {
      onNotify: (result) => metrics.notify(result),
      onTransfer: (result) => metrics.transfer(result),
      onInvalidated: (entries) => metrics.invalidated(entries),
    },
  });

  const queries = createQueryHandler({
    routes: config.routes,
    cache,
    counters,
    policy: options,
    forwardMax: options.forwardMax,
    resolve: (question) => resolveQuestion(config.routes(), question, forwardOptions),
    stats: () => ({
      cachesize: options.cacheSize,
      ...counters,
      auth: 0,
      servers: config
        .routes()
        .servers()
        .map((s) => {
          const c = serverCounters.get(serverText(s)) ?? { queries: 0, failures: 0 };
          return `${serverText(s)} ${c.queries} ${c.failures}`;
        }),
      version: VERSION,
    }),
    isLoopProbe: (name) => loops.isProbe(name),
    push: {
      notify: (q, source) => zoneSync.notify(q.key, source),
      isPushed: (name) => zoneSync.isPushed(name),
      epochOf: (name) => zoneSync.epochOf(name),
    },
    staleAllowed: (route) => options.maxStaleSeconds > 0 && (route.kind !== 'server' || options.staleServerRoutes),
    prefetchHits: options.prefetchHits,
    log,
    logQueries: options.logQueries,
    now,
  });
  const metrics = createForwarderMetrics(registry, {
    server: () => `dns://${options.listenAddresses[0] ?? ''}:${boundPort()}`,
    cacheDenialEntries: () => cache.denialEntries,
    inFlight: () => queries.inFlight(),
    loopDisabled: () => disabled.size,
    reloadFailures: () => config.failures,
    rejectedReplies: () => rejectedByReason,
    cache: counters,
    cacheEntries: () => cache.size,
    push: queries.push,
    zones: () => zoneSync.zones(),
  });

  const handler = createQueryPipeline({
    handle: queries.handle,
    recursionAvailable: true,
    // Forwarded whatever the class; CHAOS is answered here (statistics).
    classes: [QCLASS.IN, QCLASS.CH, QCLASS.ANY],
    // NOTIFY from the record-builder: push invalidation (zone-sync.ts).
    opcodes: [OPCODE.QUERY, OPCODE.NOTIFY],
    udpPayloadBytes: options.ednsPacketMax,
    log,
    observe: (outcome) => {
      if (outcome.rejected) rejected[outcome.rejected] = (rejected[outcome.rejected] ?? 0) + 1;
      metrics.observeQuery(outcome);
    },
  });

  return {
    counters,
    rejected,
    reloadConfig: async () => {
      await config.reload();
    },
    rejectedReplies: () => rejectedReplies,
    detectLoops: () => loops.check(config.routes().servers()),
    disabledServers: () => [...disabled],
    async start() {
      // A --server that is ourselves is a mistake in the flags: refuse to start, naming it.
      for (const rule of options.rules)
        for (const server of rule.servers)
          if (isSelf(server))
            throw new FlagError('--server', serverText(server), 'a server other than this forwarder itself');
      await config.reload();
      for (const host of options.listenAddresses) {
        const listener = await listenDns({
          host,
          port: listeners[0]?.port ?? options.port,
          flags: '--listen-address, --port',
          handler,
          tcpIdleTimeoutMs: options.tcpIdleTimeoutMs,
          maxTcpConnections: options.maxTcpConnections,
          maxTcpConnectionsPerClient: options.maxTcpConnectionsPerClient,
          onHandlerError: (error) => log.debug('send failed', { err: error }),
        });
        listeners.push(listener);
        // Drain: every upstream question in flight ends by --forward-deadline at the latest.
        closers.push(`dns ${host}`, () => listener.close({ deadlineMs: options.forwardDeadlineMs + 500 }));
      }
      const poll = setInterval(() => void config.reload(), options.configPollMs);
      poll.unref();
      closers.push('config poll', () => clearInterval(poll));
      if (options.soaCheckMs > 0) {
        const soaCheck = setInterval(() => void zoneSync.checkAll(), options.soaCheckMs);
        soaCheck.unref();
        closers.push('SOA check', () => clearInterval(soaCheck));
      }
      const metricsHttp = await listenHttp(
        options.metricsAddress,
        options.metricsPort,
        {
          '/metrics': async () => ({ status: 200, body: await registry.metrics(), contentType: registry.contentType }),
        },
        { flags: '--metrics-address, --metrics-port' },
      );
      closers.push('metrics', () => metricsHttp.close());
      if (options.loopDetect) await loops.check(config.routes().servers());
      const port = listeners[0]?.port ?? 0;
      log.info('ready', {
        port,
        metricsPort: metricsHttp.port,
        addresses: options.listenAddresses,
        cacheSize: options.cacheSize,
        udpReceiveBufferBytes: listeners[0]?.udpReceiveBufferBytes() ?? 0,
        routes: config.routes().describe(),
      });
      return { port, addresses: [...options.listenAddresses], metricsPort: metricsHttp.port };
    },
    async shutdown() {
      if (!draining) {
        draining = true;
        log.info('lameduck: still answering', { lameduckMs: options.lameduckMs });
        await sleep(options.lameduckMs);
      }
      // Listeners stop reading, send what is in flight, then close; the pool goes last, since
      // the answers in flight still wait on it.
      await closers.close(log);
      await Promise.race([queries.settled(), sleep(options.forwardDeadlineMs)]);
      udpPool.close();
    },
  };
}
