import { dirname, isAbsolute, join } from 'node:path';
import {
  type CacheConfig,
  CorefileError,
  type FileConfig,
  type ForwardConfig,
  type HostPort,
  type ServerConfig,
} from '@cluster-dns/runtime';
import type { Fqdn } from '@cluster-dns/wire';
import type { CachePolicy } from '../config/cache-policy.js';
import type { RouteUpstream } from '../config/server-flag.js';
import type { ForwarderOptions } from '../options.js';
import type { ScopedHosts } from '../plugins/hosts/hosts-table.js';

// What node-local mode and Corefile mode read alike from a Corefile's server blocks: the settings
// of the one process every block runs in, and a block's cache as one route's policy.

export function fail(at: { line: number; file?: string }, message: string, source: string): never {
  throw new CorefileError(at.line, message, at.file ?? source);
}

/** One zone of a `file` line: what to read, and where relative names are read from. */
export interface FileSource extends FileConfig {
  readonly origin: Fqdn;
  /** The block's `root`, if any. */
  readonly root: string | undefined;
  /** The file the `file` line is in (its folder is where relative names are read from without `root`). */
  readonly corefileDir: string;
}

/** A forward's options for how its servers are asked, as a route carries them. */
export function upstreamOf(f: ForwardConfig): RouteUpstream {
  return {
    ...(f.tls ? { tls: { serverName: f.tls.serverName, ca: f.tls.ca, cert: f.tls.cert, key: f.tls.key } } : {}),
    maxFails: f.maxFails,
    healthCheckMs: f.healthCheck.intervalMs,
    healthRecursionDesired: f.healthCheck.recursionDesired,
    healthDomain: f.healthCheck.domain,
    failover: f.failover,
    failfast: f.failfastAllUnhealthy,
    expireMs: f.expireMs,
    readTimeoutMs: f.readTimeoutMs,
  };
}

/** A block's `cache` as one route's policy: CoreDNS's success and denial kinds on our one policy. */
export function routeCacheOf(cache: CacheConfig): { cache: CachePolicy; capacity: number } {
  return {
    cache: {
      negativeCache: true,
      negTtlSeconds: cache.denial.maxTtlSeconds,
      // One floor for both kinds: ours keeps one policy per route. CoreDNS's defaults are equal.
      minCacheTtlSeconds: Math.min(cache.success.minTtlSeconds, cache.denial.minTtlSeconds),
      maxCacheTtlSeconds: cache.success.maxTtlSeconds,
    },
    capacity: cache.success.capacity + cache.denial.capacity,
  };
}

/** What either mode's plan says of the process, whatever its routes. */
export interface ProcessPlan {
  readonly listenAddresses: readonly string[];
  readonly port: number;
  /** Other blocks' addresses and ports, each bound too (CoreDNS serves each port a block names). */
  readonly moreListeners: ReadonlyArray<{ readonly addresses: readonly string[]; readonly port: number }>;
  /** Entries of the one cache. */
  readonly cacheSize: number;
  /** `prometheus [ADDRESS]`: where the forwarder's /metrics listens. */
  readonly metrics: HostPort | undefined;
  /** `health [ADDRESS]`: where /health answers. */
  readonly health: HostPort | undefined;
  readonly lameduckMs: number | undefined;
  readonly logQueries: boolean;
  readonly loopDetect: boolean;
  readonly prefetchHits: number | undefined;
  /** `reload [INTERVAL]`: how often the Corefile is read again; undefined without `reload`. */
  readonly reloadMs: number | undefined;
  readonly forwardMax: number | undefined;
}

const sameAddress = (a: HostPort | undefined, b: HostPort) =>
  a === undefined || (a.host === b.host && a.port === b.port);

/**
 * The process's settings, block by block: every block must bind the same addresses and port (one
 * set of sockets answers them all, routing each name by its longest zone), no zone may have two
 * blocks, and `prometheus` and `health` must say the same address wherever they appear; `reload`
 * and `health`'s `lameduck` are the last block's that says one.
 */
export class ServerSettings {
  listen: { addresses: readonly string[]; port: number; line: number } | undefined;
  /** Listeners beyond the first block's: blocks on other ports or addresses (a name still goes to its longest zone). */
  readonly more: Array<{ addresses: readonly string[]; port: number }> = [];
  metrics: HostPort | undefined;
  health: HostPort | undefined;
  lameduckMs: number | undefined;
  reloadMs: number | undefined;
  private readonly zones = new Set<Fqdn>();

  constructor(private readonly source: string) {}

  take(block: ServerConfig): void {
    const { source } = this;
    const line = (plugin: string) => ({ line: block.lines.get(plugin) ?? block.line });
    const binds = block.bind ?? ['0.0.0.0'];
    for (const { zone, port } of block.keys) {
      const key = `${binds.join(' ')}:${port}`;
      if (this.listen === undefined) this.listen = { addresses: binds, port, line: block.line };
      else if (
        `${this.listen.addresses.join(' ')}:${this.listen.port}` !== key &&
        !this.more.some((m) => `${m.addresses.join(' ')}:${m.port}` === key)
      ) {
        if (this.listen.port === 0 || port === 0)
          fail(block, 'a block on port 0 (a free port) must be the only listener', source);
        this.more.push({ addresses: binds, port });
      }
      if (this.zones.has(zone)) fail(block, `zone ${zone} has two server blocks`, source);
      this.zones.add(zone);
    }
    if (block.reloadMs !== undefined) this.reloadMs = block.reloadMs;
    if (block.prometheus) {
      if (!sameAddress(this.metrics, block.prometheus))
        fail(line('prometheus'), 'prometheus: every block must use the same address', source);
      this.metrics = block.prometheus;
    }
    if (block.health) {
      if (!sameAddress(this.health, block.health.address))
        fail(line('health'), 'health: every block must use the same address', source);
      this.health = block.health.address;
      if (block.health.lameduckMs !== undefined) this.lameduckMs = block.health.lameduckMs;
    }
  }
}

/** A file a Corefile line names, as read: absolute, from the block's `root`, else from the Corefile's folder. */
export function corefilePath(file: string, root: string | undefined, corefile: string): string {
  if (isAbsolute(file)) return file;
  return join(root ?? dirname(corefile), file);
}

/** What every block's hosts and file lines read, with their paths made whole. */
export function blockFilesOf(servers: readonly ServerConfig[]): { hosts: ScopedHosts[]; files: FileSource[] } {
  const hosts: ScopedHosts[] = [];
  const files: FileSource[] = [];
  for (const block of servers) {
    const zones = block.keys.map((k) => k.zone);
    if (block.hosts)
      hosts.push({
        ...block.hosts,
        file: corefilePath(block.hosts.file, block.root, block.file),
        zones: block.hosts.zones ?? zones,
        blockZones: zones,
      });
    for (const file of block.files)
      for (const origin of file.zones ?? zones)
        files.push({
          ...file,
          file: corefilePath(file.file, block.root, block.file),
          origin,
          root: block.root,
          corefileDir: block.file,
        });
  }
  return { hosts, files };
}

/**
 * The options a Corefile's process settings give, over `base` (the forwarder's flags, or
 * node-cache's): one spelling of each for both modes. The cache policy is each route's (its
 * block's `cache`), so the process-wide one only keeps denials as they come.
 */
export function withProcessPlan(base: ForwarderOptions, plan: ProcessPlan, listenFlags: string): ForwarderOptions {
  return {
    ...base,
    rules: [],
    listenAddresses: plan.listenAddresses,
    port: plan.port,
    moreListeners: plan.moreListeners,
    cacheSize: plan.cacheSize,
    negativeCache: true,
    negTtlSeconds: 0,
    minCacheTtlSeconds: 0,
    maxCacheTtlSeconds: 0,
    forwardMax: plan.forwardMax ?? base.forwardMax,
    loopDetect: plan.loopDetect,
    logQueries: plan.logQueries || base.logQueries,
    metricsPort: plan.metrics?.port ?? base.metricsPort,
    metricsAddress: plan.metrics?.host ?? base.metricsAddress,
    // CoreDNS prefetches only with `prefetch`.
    prefetchHits: plan.prefetchHits ?? 0,
    lameduckMs: plan.lameduckMs ?? base.lameduckMs,
    listenFlags,
  };
}
