import type { ForwardConfig, HostPort, ServerConfig } from '@cluster-dns/runtime';
import { type Fqdn, ROOT } from '@cluster-dns/wire';
import type { RouteCache } from '../config/cache-policy.js';
import type { ServerRule } from '../config/server-flag.js';
import type { ScopedHosts } from '../plugins/hosts/hosts-table.js';
import {
  blockFilesOf,
  type FileSource,
  fail,
  type ProcessPlan,
  routeCacheOf,
  ServerSettings,
  upstreamOf,
} from '../server/corefile-plan.js';

/** Where one zone's queries go, and how its answers are cached. */
export interface ZonePlan {
  readonly zone: Fqdn;
  /** Servers, or the resolv file (`forward . /etc/resolv.conf`) whose nameservers are the servers. */
  readonly servers: readonly HostPort[] | { readonly resolvFile: string };
  readonly forceTcp: boolean;
  /** Which server is asked first (forward's `policy`). */
  readonly policy: ForwardConfig['policy'];
  readonly cache: RouteCache;
  /** Entries this block's cache may hold (CoreDNS: success + denial capacity); 0 without `cache`. */
  readonly capacity: number;
  /** TLS, health and failover of its servers. */
  readonly upstream: ServerRule['upstream'];
}

/** A Corefile of nodelocaldns.yaml's shape, as the forwarder runs it. */
export interface NodeLocalPlan extends ProcessPlan {
  /** Every block but the root zone's, as `--server=/zone/` rules. */
  readonly rules: readonly ServerRule[];
  /** The `.` block; undefined when there is none (then names outside every zone are REFUSED). */
  readonly root: ZonePlan | undefined;
  readonly hosts: readonly ScopedHosts[];
  readonly files: readonly FileSource[];
  /** The blocks as read, for the plugins each gives per block (server/block-plugins.ts). */
  readonly servers: readonly ServerConfig[];
}

/**
 * Turns a rendered Corefile, read (runtime's readCorefile, node-local mode), into the forwarder's plan. Every block must listen on the same
 * addresses and port (nodelocaldns.yaml's do), since the forwarder has one set of listeners and
 * routes each name by its longest zone. Anything outside the subset is an error naming its line.
 */
export function planNodeLocal(servers: readonly ServerConfig[], source = 'Corefile'): NodeLocalPlan {
  const settings = new ServerSettings(source);
  // `log` is the log stage's (per block, with its classes and format), not --log-queries.
  const logQueries = false;
  let loopDetect = false;
  let prefetchHits: number | undefined;
  let forwardMax: number | undefined;
  const zones: ZonePlan[] = [];
  for (const block of servers) {
    loopDetect ||= block.loop;
    const cache = block.cache && routeCacheOf(block.cache);
    if (block.cache) {
      if (block.cache.zones)
        fail(block.cache, 'cache: zones after the TTL are not supported (the block’s zones are cached)', source);
      if (block.cache.serveStale)
        fail(block.cache, 'cache: serve_stale is not supported in node-local mode (see -use-stale-cache)', source);
      if (block.cache.disable.success.length || block.cache.disable.denial.length)
        fail(block.cache, 'cache: disable is not supported in node-local mode', source);
      // AMOUNT hits within a minute; when the entry is refreshed is ours (a tenth to a fifth of its TTL).
      if (block.cache.prefetch) prefetchHits = block.cache.prefetch.amount;
    }
    const forward = block.forward;
    if (!forward) fail(block, `server block "${block.keys.map((k) => k.zone).join(' ')}" has no forward`, source);
    if (forward.except.length) fail(forward, 'forward: except is not supported in node-local mode', source);
    if (forward.maxConcurrent) forwardMax = Math.max(forwardMax ?? 0, forward.maxConcurrent);
    settings.take(block);
    for (const { zone } of block.keys) {
      if (forward.from !== ROOT && forward.from !== zone)
        fail(forward, `forward: FROM must be "." or the block's zone, got ${JSON.stringify(forward.from)}`, source);
      if (zone !== ROOT && !Array.isArray(forward.to))
        fail(forward, `forward: a resolv.conf path is only supported in the "." block`, source);
      zones.push({
        zone,
        servers: forward.to,
        forceTcp: forward.forceTcp,
        policy: forward.policy,
        cache: cache?.cache ?? 'off',
        capacity: cache?.capacity ?? 0,
        upstream: upstreamOf(forward),
      });
    }
  }
  const root = zones.find((z) => z.zone === ROOT);
  const rules: ServerRule[] = zones
    .filter((z) => z.zone !== ROOT)
    .map((z) => ({
      domains: [z.zone],
      servers: z.servers as readonly HostPort[],
      forceTcp: z.forceTcp,
      policy: z.policy,
      cache: z.cache,
      upstream: z.upstream,
      // The cluster's DNS already sent unknown reverse names upstream: asking again is waste.
      fallThrough: false,
    }));
  const { metrics, health, lameduckMs, reloadMs } = settings;
  const first = settings.listen as { addresses: readonly string[]; port: number };
  return {
    listenAddresses: first.addresses,
    moreListeners: settings.more,
    port: first.port,
    rules,
    root,
    // One LRU serves every block here, so the largest block's capacity, not their sum (which would
    // be ~60,000 answers for nodelocaldns.yaml's four blocks, where one block holds ~all of them).
    cacheSize: zones.reduce((n, z) => Math.max(n, z.capacity), 0),
    metrics,
    health,
    lameduckMs,
    logQueries,
    loopDetect,
    prefetchHits,
    reloadMs,
    forwardMax,
    ...blockFilesOf(servers),
    servers,
  };
}
