import type { CacheConfig, ForwardConfig, HostPort, ServerConfig } from '@cluster-dns/runtime';
import { type Fqdn, isInZone, ROOT } from '@cluster-dns/wire';
import type { CachePolicy, RouteCache } from '../config/cache-policy.js';
import type { ServerPolicy, ServerRule } from '../config/server-flag.js';
import type { ScopedHosts } from '../plugins/hosts/hosts-table.js';
import {
  blockFilesOf,
  type FileSource,
  fail,
  type ProcessPlan,
  routeCacheOf,
  ServerSettings,
  upstreamOf,
} from './corefile-plan.js';

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
        readonly upstream: ServerRule['upstream'];
      }
    | undefined;
  /** serve_stale: seconds an expired answer may be served when every server fails; 0: never. */
  readonly maxStaleSeconds: number;
  readonly hosts: readonly ScopedHosts[];
  /** `file` zones: each file, read with the routes (and again at each reload). */
  readonly files: readonly FileSource[];
  /** Zones whose answers turn the order of their A and AAAA records (`loadbalance`). */
  readonly loadbalance: readonly Fqdn[];
  /** `autopath @kubernetes`: the kubernetes zone whose pods' search paths are walked (autopath/). */
  readonly autopathZone?: Fqdn;
  /** The kubernetes plugin's first zone: where the client map is (acl's `namespace`). */
  readonly clusterZone?: Fqdn;
  /** The blocks as read, for the plugins each gives per block (block-plugins.ts). */
  readonly servers: readonly ServerConfig[];
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

/** The block's forward for a name: the first, in the order written, whose FROM holds it and that does not except it. */
function forwardFor(forwards: readonly ForwardConfig[], zone: Fqdn): ForwardConfig | undefined {
  return forwards.find((f) => (f.from === ROOT || isInZone(zone, f.from)) && !under(zone, f.except));
}

/**
 * Maps a Pod's Corefile (runtime's readCorefile, Corefile mode) onto the forwarder. Every block
 * listens on the same addresses and port: one set of sockets answers them all, and a name goes to
 * the longest zone, as CoreDNS picks a block. In a block, the kubernetes and k8s_external zones go
 * to the record-builder (`recordBuilder`), falling through to the block's forward where
 * `fallthrough` says; the block's other names go to the first of its forwards whose FROM holds them
 * (an `except` name to none: SERVFAIL, as CoreDNS's "no next plugin"). Its cache applies to what it
 * serves; its other plugins are read per block (block-plugins.ts).
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
  const loadbalance: Fqdn[] = [];
  let autopathZone: Fqdn | undefined;
  let clusterZone: Fqdn | undefined;
  for (const block of servers) {
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
    const forwards = block.forwards;
    for (const f of forwards) {
      // max_concurrent 0 is CoreDNS's "no limit": the forwarder's own share then applies.
      if (f.maxConcurrent) forwardMax = Math.max(forwardMax ?? 0, f.maxConcurrent);
      if (f.from !== ROOT && !zones.includes(f.from) && !zones.some((z) => isInZone(f.from, z)))
        fail(f, `forward: FROM ${f.from} is outside the block's zones`, source);
    }
    const routeOf = (zone: Fqdn, f: ForwardConfig) => ({
      servers: f.to,
      // A forward's answer is its answer: not asked of the upstreams again (the kube-dns layout's
      // reverse-zone fallthrough is the kubernetes plugin's `fallthrough` here).
      fallThrough: false,
      forceTcp: f.forceTcp,
      policy: f.policy,
      cache: cacheFor(zone, cache),
      upstream: upstreamOf(f),
    });
    const k = block.kubernetes;
    if (k) {
      if (kubernetesSeen)
        fail(k, `kubernetes: one kubernetes plugin per Corefile (line ${kubernetesSeen.line} has one)`, source);
      kubernetesSeen = k;
      clusterZone = (k.zones ?? zones)[0];
    }
    // The record-builder answers the kubernetes zones (with multicluster's) and k8s_external's.
    const builderZones = [
      ...(k ? [...(k.zones ?? zones), ...k.multicluster] : []),
      ...(block.k8sExternal ? (block.k8sExternal.zones ?? zones) : []),
    ];
    for (const zone of new Set(builderZones)) {
      const fall =
        block.k8sExternal && under(zone, block.k8sExternal.zones ?? zones)
          ? block.k8sExternal.fallthrough
          : k?.fallthrough;
      // A fallthrough with no forward after it has nothing to fall to: the name's NXDOMAIN stands.
      const fallsThrough =
        fall !== undefined && (fall.length === 0 || under(zone, fall)) && forwardFor(forwards, zone) !== undefined;
      rules.push({
        domains: [zone],
        servers: [recordBuilder],
        cache: cacheFor(zone, cache),
        fallThrough: fallsThrough,
        policy: 'sequential',
      });
    }
    for (const zone of zones) {
      if (builderZones.includes(zone)) continue;
      const f = forwardFor(forwards, zone);
      if (!f) {
        // Nothing after the block's own plugins (file, template, hosts): what they leave is SERVFAIL.
        if (zone !== ROOT) rules.push({ domains: [zone], servers: [], unserved: true, cache: 'off' });
        continue;
      }
      const route = routeOf(zone, f);
      if (zone === ROOT) root = route;
      else {
        if (!Array.isArray(f.to)) fail(f, 'forward: a resolv.conf path is only supported in the "." block', source);
        rules.push({ domains: [zone], ...route, servers: f.to as readonly HostPort[] });
      }
    }
    for (const f of forwards) {
      // A forward of a subzone (`forward example.org 10.0.0.1` in the "." block): a route of its own.
      if (f.from !== ROOT && !zones.includes(f.from)) {
        if (!Array.isArray(f.to)) fail(f, 'forward: a resolv.conf path is only supported for "."', source);
        rules.push({ domains: [f.from], ...routeOf(f.from, f), servers: f.to as readonly HostPort[] });
      }
      // An except name goes to the next forward that takes it, or to none.
      for (const name of f.except) {
        const other = forwards.find(
          (g) => g !== f && (g.from === ROOT || isInZone(name, g.from)) && !under(name, g.except),
        );
        if (other && Array.isArray(other.to))
          rules.push({ domains: [name], ...routeOf(name, other), servers: other.to as readonly HostPort[] });
        else rules.push({ domains: [name], servers: [], unserved: true, cache: 'off' });
      }
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
    moreListeners: settings.more,
    port: first.port,
    rules,
    root,
    cacheSize,
    metrics,
    health,
    lameduckMs,
    // `log` is the log stage's (per block, with its classes and format), not --log-queries.
    logQueries: false,
    loopDetect: servers.some((b) => b.loop),
    prefetchHits,
    maxStaleSeconds,
    reloadMs,
    forwardMax,
    ...blockFilesOf(servers),
    loadbalance,
    ...(autopathZone ? { autopathZone } : {}),
    ...(clusterZone ? { clusterZone } : {}),
    servers,
  };
}
