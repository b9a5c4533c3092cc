import type { ClientLimits, HostPort } from '@cluster-dns/runtime';
import { type Fqdn, isInZone, parentOf, ROOT, toFqdn } from '@cluster-dns/wire';
import type { RouteCache } from './cache-policy.js';
import type { RouteUpstream, ServerPolicy, ServerRule } from './server-flag.js';

export type RouteKind = 'server' | 'stub' | 'upstream' | 'local' | 'unserved';

export interface Route {
  /** ROOT for the default route. */
  readonly domain: Fqdn;
  readonly kind: RouteKind;
  readonly servers: readonly HostPort[];
  /** A route whose NXDOMAIN/REFUSED is asked upstream again (reverse zones by default, kube-dns's way). */
  readonly fallsThrough: boolean;
  /** Which of its servers is asked first. */
  readonly policy: ServerPolicy;
  /** Its cached answers' A and AAAA records served in a turning order (a Corefile's `loadbalance`). */
  readonly loadbalance: boolean;
  /** Asked over TCP only (node-local mode's `force_tcp`). */
  readonly forceTcp: boolean;
  /** Its own cache policy; undefined means the process's flags. */
  readonly cache: RouteCache | undefined;
  /** Its servers are all the cluster's DNS (RouteSources.carryClientTo): its queries name the client. */
  readonly carryClient: boolean;
  /** TLS, health and failover of its servers (a Corefile forward's options); plain UDP/TCP when unset. */
  readonly upstream: RouteUpstream | undefined;
  /** Stable text of where this route sends queries: equal ids mean cached answers stay valid. */
  readonly id: string;
}

const REVERSE = [toFqdn('in-addr.arpa'), toFqdn('ip6.arpa')];
const serverText = (s: HostPort) => (s.host.includes(':') ? `[${s.host}]#${s.port}` : `${s.host}#${s.port}`);

export interface RouteSources {
  /** `--server` rules, in flag order. */
  rules: readonly ServerRule[];
  /** ConfigMap stubDomains. */
  stubDomains: ReadonlyMap<string, readonly HostPort[]>;
  /** ConfigMap upstreamNameservers: when set, they replace resolv.conf's. */
  upstreamNameservers: readonly HostPort[];
  /** Nameservers of --resolv-file, or empty with --no-resolv. */
  resolvConf: readonly HostPort[];
  /** How the default route asks and caches (a Corefile's `.` block). */
  upstream?: {
    readonly forceTcp: boolean;
    readonly cache: RouteCache | undefined;
    readonly policy?: ServerPolicy;
    readonly upstream?: RouteUpstream | undefined;
  };
  /** The ConfigMap's `clientLimits`: per-client limits over the flags' (not routes, but read with them). */
  clientLimits?: Readonly<Partial<ClientLimits>>;
  /** Zones whose cached answers turn the order of their A and AAAA records (a Corefile's `loadbalance`). */
  loadbalance?: readonly Fqdn[];
  /**
   * The cluster's DNS (node-local mode: the Service behind __PILLAR__CLUSTER__DNS__): a route whose
   * servers are all among these carries each query's client address to them (wire's
   * CLIENT_ADDRESS_OPTION); no other route does, so it never leaves the cluster.
   */
  carryClientTo?: readonly string[];
}

/** What of a route's upstream options changes where answers come from (cached answers of another are not valid). */
const upstreamText = (u: RouteUpstream | undefined) => (u?.tls ? `/tls:${u.tls.serverName ?? ''}` : '');

const cacheText = (cache: RouteCache | undefined) =>
  cache === undefined ? '' : cache === 'off' ? '/nocache' : `/cache:${JSON.stringify(cache)}`;

/** Where each name goes: the longest `--server=/domain/` or stub domain suffix, else upstream. */
export class RouteTable {
  private readonly byDomain = new Map<Fqdn, Route>();
  readonly upstream: Route;

  constructor(sources: RouteSources) {
    const loadbalance = sources.loadbalance ?? [];
    const servers = new Map<
      Fqdn,
      {
        kind: RouteKind;
        servers: HostPort[];
        forceTcp: boolean;
        cache: RouteCache | undefined;
        fallThrough: boolean | undefined;
        policy: ServerPolicy;
        unserved: boolean;
        upstream: RouteUpstream | undefined;
      }
    >();
    const plain: HostPort[] = [];
    for (const rule of sources.rules) {
      if (rule.domains.length === 0) {
        plain.push(...rule.servers);
        continue;
      }
      for (const domain of rule.domains) {
        const entry = servers.get(domain) ?? {
          kind: 'server' as RouteKind,
          servers: [],
          forceTcp: rule.forceTcp ?? false,
          cache: rule.cache,
          fallThrough: rule.fallThrough,
          policy: rule.policy ?? 'sequential',
          unserved: rule.unserved ?? false,
          upstream: rule.upstream,
        };
        entry.servers.push(...rule.servers);
        servers.set(domain, entry);
      }
    }
    for (const [domain, list] of sources.stubDomains) {
      const key = toFqdn(domain);
      const entry = servers.get(key) ?? {
        kind: 'stub' as RouteKind,
        servers: [],
        forceTcp: false,
        cache: undefined,
        fallThrough: undefined,
        policy: 'sequential' as ServerPolicy,
        unserved: false,
        upstream: undefined,
      };
      entry.servers.push(...list);
      servers.set(key, entry);
    }
    const turning = (domain: Fqdn) => loadbalance.some((z) => isInZone(domain, z));
    const carryTo = sources.carryClientTo ?? [];
    const carries = (list: readonly HostPort[]) => list.length > 0 && list.every((s) => carryTo.includes(s.host));
    for (const [domain, entry] of servers) {
      const kind: RouteKind = entry.unserved ? 'unserved' : entry.servers.length === 0 ? 'local' : entry.kind;
      const loadbalance = turning(domain);
      this.byDomain.set(domain, {
        domain,
        kind,
        servers: entry.servers,
        fallsThrough: kind !== 'local' && (entry.fallThrough ?? REVERSE.some((z) => isInZone(domain, z))),
        policy: entry.policy,
        loadbalance,
        forceTcp: entry.forceTcp,
        cache: entry.cache,
        carryClient: carries(entry.servers),
        upstream: entry.upstream,
        id: `${domain}>${kind}${entry.forceTcp ? '/tcp' : ''}${upstreamText(entry.upstream)}${loadbalance ? '/lb' : ''}${carries(entry.servers) ? '/client' : ''}${cacheText(entry.cache)}:${entry.servers.map(serverText).join(',')}`,
      });
    }
    const defaults = [
      ...plain,
      ...(sources.upstreamNameservers.length ? sources.upstreamNameservers : sources.resolvConf),
    ];
    this.upstream = {
      domain: ROOT,
      kind: 'upstream',
      servers: defaults,
      fallsThrough: false,
      policy: sources.upstream?.policy ?? 'sequential',
      loadbalance: turning(ROOT),
      forceTcp: sources.upstream?.forceTcp ?? false,
      cache: sources.upstream?.cache,
      carryClient: carries(defaults),
      upstream: sources.upstream?.upstream,
      id: `.>upstream${sources.upstream?.forceTcp ? '/tcp' : ''}${upstreamText(sources.upstream?.upstream)}${carries(defaults) ? '/client' : ''}${turning(ROOT) ? '/lb' : ''}${cacheText(sources.upstream?.cache)}:${defaults.map(serverText).join(',')}`,
    };
  }

  routeFor(name: Fqdn): Route {
    for (let current = name; ; current = parentOf(current)) {
      const route = this.byDomain.get(current);
      if (route) return route;
      if (current === ROOT) return this.upstream;
    }
  }

  routes(): Route[] {
    return [...this.byDomain.values(), this.upstream];
  }

  /** Every distinct server, for servers.bind and loop detection. */
  servers(): HostPort[] {
    const seen = new Map<string, HostPort>();
    for (const r of this.routes()) for (const s of r.servers) seen.set(serverText(s), s);
    return [...seen.values()];
  }

  describe(): Record<string, string[]> {
    return Object.fromEntries(
      this.routes().map((r) => [
        r.domain,
        r.kind === 'local' ? ['(local)'] : r.kind === 'unserved' ? ['(none)'] : r.servers.map(serverText),
      ]),
    );
  }
}

export { serverText };

const turns = new WeakMap<Route, number>();

/**
 * A route's servers in the order to ask them this time: as listed (sequential), from the next one
 * each time (round_robin), or shuffled (random, CoreDNS's default: load spread over the servers).
 */
export function serversInTurn(route: Route): readonly HostPort[] {
  const list = route.servers;
  if (list.length < 2 || route.policy === 'sequential') return list;
  if (route.policy === 'round_robin') {
    const turn = turns.get(route) ?? 0;
    turns.set(route, turn + 1);
    const at = turn % list.length;
    return [...list.slice(at), ...list.slice(0, at)];
  }
  const out = [...list];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [out[i], out[j]] = [out[j] as HostPort, out[i] as HostPort];
  }
  return out;
}
