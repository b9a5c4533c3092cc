import type { CacheConfig, HostPort, ServerConfig } from '@cluster-dns/runtime';
import { type Fqdn, isInZone, ROOT } from '@cluster-dns/wire';
import type { CachePolicy, RouteCache } from '../config/cache-policy.js';
import type { ServerPolicy, ServerRule } from '../config/server-flag.js';
import { type ScopedAcl, scopedAcl } from '../plugins/acl/acl-rules.js';
import type { ScopedHosts } from '../plugins/hosts/hosts-table.js';
import type { ScopedRewrites } from '../plugins/rewrite/name-rewrite.js';
import { fail, type ProcessPlan, routeCacheOf, ServerSettings } from './corefile-plan.js';

/** The forwarder's side of a CoreDNS Pod's Corefile: listeners, routes, cache, and the plugins it runs. */
export interface PodPlan extends ProcessPlan {
  /** Every zone but the root's: the kubernetes zones to the record-builder, other blocks to their forward. */
  readonly rules: readonly ServerRule[];
  /** The root's forward; undefined when no block forwards `.` (then other names are REFUSED). */
  readonly root:
    | {
        readonly servers: readonly HostPort[] | { readonly resolvFile: string };
        readonly forceTcp: boolean;
        readonly policy: ServerPolicy;
        readonly cache: RouteCache;
      }
    | undefined;
  /** serve_stale: seconds an expired answer may be served when every server fails; 0: never. */
  readonly maxStaleSeconds: number;
  readonly rewrites: readonly ScopedRewrites[];
  readonly hosts: readonly ScopedHosts[];
  /** Zones whose answers turn the order of their A and AAAA records (`loadbalance`). */
  readonly loadbalance: readonly Fqdn[];
  /** `autopath @kubernetes`: the kubernetes zone whose pods' search paths are walked (autopath/). */
  readonly autopathZone?: Fqdn;
  /** Each block's `acl`, for the names it serves. */
  readonly acls: readonly ScopedAcl[];
  /** The kubernetes plugin's first zone: where the client map is (acl's `namespace`). */
  readonly clusterZone?: Fqdn;
}

const under = (name: Fqdn, zones: readonly Fqdn[]) => zones.some((z) => isInZone(name, z));

/** A block's cache policy for one zone, with `disable success|denial` where it names the zone. */
function cacheFor(zone: Fqdn, cache: CacheConfig | undefined): RouteCache {
  if (!cache) return 'off';
  const { cache: policy } = routeCacheOf(cache);
  const disable = { success: under(zone, cache.disable.success), denial: under(zone, cache.disable.denial) };
  if (!disable.success && !disable.denial) return policy;
  return { ...policy, disable } satisfies CachePolicy;
}

/**
 * Maps a Pod's Corefile (runtime's readCorefile, Corefile mode) onto the forwarder. Every block
 * listens on the same addresses and port: one set of sockets answers them all, and a name goes to
 * the longest zone, as CoreDNS picks a block. In a block, the kubernetes zones go to the
 * record-builder (`recordBuilder`), falling through to the block's forward where `fallthrough`
 * says; the block's other names go to its forward. Its cache, rewrite, hosts and loadbalance apply
 * to what it serves. Anything the forwarder cannot do is an error naming the line.
 */
export function planPod(servers: readonly ServerConfig[], recordBuilder: HostPort, source = 'Corefile'): PodPlan {
  const settings = new ServerSettings(source);
  let prefetchHits: number | undefined;
  let maxStaleSeconds = 0;
  let forwardMax: number | undefined;
  let cacheSize = 0;
  let kubernetesSeen: { line: number } | undefined;
  let root: PodPlan['root'];
  const rules: ServerRule[] = [];
  const rewrites: ScopedRewrites[] = [];
  const hosts: ScopedHosts[] = [];
  const loadbalance: Fqdn[] = [];
  let autopathZone: Fqdn | undefined;
  let clusterZone: Fqdn | undefined;
  const acls: ScopedAcl[] = [];
  for (const block of servers) {
    if (block.acl)
      acls.push(
        scopedAcl(
          block.acl,
          block.keys.map((k) => k.zone),
        ),
      );
    const zones = block.keys.map((k) => k.zone);
    settings.take(block);
    const cache = block.cache;
    if (cache) {
      if (cache.zones)
        fail(cache, 'cache: zones after the TTL are not supported (the block’s zones are cached)', source);
      cacheSize = Math.max(cacheSize, routeCacheOf(cache).capacity);
      if (cache.prefetch) prefetchHits = cache.prefetch.amount;
      if (cache.serveStale) {
        if (cache.serveStale.verify)
          fail(
            cache,
            'cache: serve_stale verify is not supported (stale answers are served only when every server fails)',
            source,
          );
        maxStaleSeconds = Math.round(cache.serveStale.durationMs / 1000);
      }
    }
    const forward = block.forward;
    if (forward) {
      if (forward.except.length) fail(forward, 'forward: except is not supported', source);
      if (forward.maxConcurrent !== undefined) forwardMax = Math.max(forwardMax ?? 0, forward.maxConcurrent);
      if (forward.from !== ROOT && !zones.includes(forward.from) && !zones.some((z) => isInZone(forward.from, z)))
        fail(forward, `forward: FROM ${forward.from} is outside the block's zones`, source);
    }
    // Where the block's names go when kubernetes does not answer them: its forward, if it covers them.
    const forwardFor = (zone: Fqdn) =>
      forward && (forward.from === ROOT || isInZone(zone, forward.from)) ? forward : undefined;
    const k = block.kubernetes;
    if (k) {
      if (kubernetesSeen)
        fail(k, `kubernetes: one kubernetes plugin per Corefile (line ${kubernetesSeen.line} has one)`, source);
      kubernetesSeen = k;
      clusterZone = (k.zones ?? zones)[0];
      // The multicluster zones are the kubernetes plugin's too (CoreDNS asks they be among its zones).
      const kZones = [...new Set([...(k.zones ?? zones), ...k.multicluster])];
      for (const zone of kZones) {
        const fallsThrough = k.fallthrough !== undefined && (k.fallthrough.length === 0 || under(zone, k.fallthrough));
        if (fallsThrough && !forwardFor(zone))
          fail(k, `kubernetes: fallthrough in ${zone} needs a forward for it in this block`, source);
        rules.push({
          domains: [zone],
          servers: [recordBuilder],
          cache: cacheFor(zone, cache),
          fallThrough: fallsThrough,
          policy: 'sequential',
        });
      }
    }
    for (const zone of zones) {
      const f = forwardFor(zone);
      if (!f) {
        if (!k) fail(block, `server block "${zones.join(' ')}" has neither kubernetes nor forward for ${zone}`, source);
        continue;
      }
      const route = {
        servers: f.to,
        forceTcp: f.forceTcp,
        policy: f.policy,
        cache: cacheFor(zone, cache),
      };
      if (zone === ROOT) root = route;
      else {
        if (!Array.isArray(f.to)) fail(f, 'forward: a resolv.conf path is only supported in the "." block', source);
        rules.push({ domains: [zone], ...route, servers: f.to as readonly HostPort[] });
      }
    }
    // A forward of a subzone (`forward example.org 10.0.0.1` in the "." block): a route of its own.
    if (forward && forward.from !== ROOT && !zones.includes(forward.from)) {
      if (!Array.isArray(forward.to)) fail(forward, 'forward: a resolv.conf path is only supported for "."', source);
      rules.push({
        domains: [forward.from],
        servers: forward.to as readonly HostPort[],
        forceTcp: forward.forceTcp,
        policy: forward.policy,
        cache: cacheFor(forward.from, cache),
      });
    }
    // `disable success|denial ZONE` for a zone inside a route: a route of its own, as its parent but for the cache.
    for (const zone of cache ? [...cache.disable.success, ...cache.disable.denial] : []) {
      if (zone === ROOT || rules.some((r) => r.domains.includes(zone))) continue;
      const parent =
        rules
          .filter((r) => r.domains.some((d) => isInZone(zone, d)))
          .sort((a, b) => (b.domains[0]?.length ?? 0) - (a.domains[0]?.length ?? 0))[0] ??
        (root && Array.isArray(root.servers) ? { ...root, domains: [ROOT] } : undefined);
      if (!parent) fail(cache as CacheConfig, `cache: disable ${zone}: no route of this block serves it`, source);
      rules.push({ ...parent, domains: [zone], cache: cacheFor(zone, cache) } as ServerRule);
    }
    if (block.rewrite.length) rewrites.push({ zones, rules: block.rewrite });
    if (block.hosts) hosts.push({ ...block.hosts, zones: block.hosts.zones ?? zones });
    if (block.loadbalance) loadbalance.push(...zones);
    if (block.autopath) {
      const at = { line: block.lines.get('autopath') ?? block.line };
      // CoreDNS's @kubernetes needs `pods verified` for the asker's namespace; ours, for the client map.
      if (k?.pods !== 'verified')
        fail(at, 'autopath: @kubernetes needs this block’s kubernetes plugin with "pods verified"', source);
      autopathZone = (k.zones ?? zones)[0];
    }
  }
  const { metrics, health, lameduckMs, reloadMs } = settings;
  const first = settings.listen as { addresses: readonly string[]; port: number };
  return {
    listenAddresses: first.addresses,
    port: first.port,
    rules,
    root,
    cacheSize,
    metrics,
    health,
    lameduckMs,
    logQueries: servers.some((b) => b.log),
    loopDetect: servers.some((b) => b.loop),
    prefetchHits,
    maxStaleSeconds,
    reloadMs,
    forwardMax,
    rewrites,
    hosts,
    loadbalance,
    ...(autopathZone ? { autopathZone } : {}),
    acls,
    ...(clusterZone ? { clusterZone } : {}),
  };
}
