import { type ClientLimits, ConfigError, type HostPort, type Logger, parseKubeDnsConfig } from '@cluster-dns/runtime';
import type { RawConfig } from './config-source.js';
import { type RouteSources, RouteTable } from './route-table.js';
import type { ServerRule } from './server-flag.js';

export type ReloadResult = 'applied' | 'unchanged' | 'invalid' | 'unreadable';

/** Routes and, beside them, what else a config file says (a Corefile's plugins, for the stages that read them). */
export type Configured<P> = RouteSources & { readonly plugins?: P };

export interface ConfigReloaderDeps<P> {
  /** Reads the ConfigMap folder and the resolv file (config-source.ts in the process). */
  read(): Promise<RawConfig>;
  /** The `--server` rules, fixed for the process's life. */
  rules: readonly ServerRule[];
  log: Logger;
  /** True for a server that is this forwarder itself: refused in the ConfigMap, skipped in resolv.conf. */
  isSelf?(server: HostPort): boolean;
  /**
   * Builds the routes from what was read, instead of the kube-dns ConfigMap and `rules` (node-local
   * mode: its Corefile). Throws on an invalid config, which then keeps the last good routes.
   */
  routesFrom?(raw: RawConfig): Configured<P>;
  /**
   * The routes to run on when no valid config has been seen yet (node-local mode: its Corefile
   * without the kube-dns ConfigMap). The kube-dns layout's are built in: the `--server` rules and
   * resolv.conf, no stub domains.
   */
  defaultsFrom?(raw: RawConfig): Configured<P>;
  /** Told of each new route table that replaced the previous one; may add fields to the log line. */
  onApplied?(next: RouteTable, previous: RouteTable, plugins: P): Record<string, unknown> | undefined;
  /** The plugins of a config that names none (the kube-dns layout's, and before any config). */
  noPlugins: P;
  /** Told of the ConfigMap's `clientLimits` each time a config is applied (the defaults: none). */
  onLimits?(limits: Readonly<Partial<ClientLimits>>): void;
}

export interface ConfigReloader<P> {
  /** The routes in force. */
  routes(): RouteTable;
  /** The plugins in force, read with the routes and applied with them. */
  plugins(): P;
  /** The ConfigMap's `clientLimits` in force (empty: the flags'). */
  clientLimits(): Readonly<Partial<ClientLimits>>;
  /** Reads the sources again; applies a valid change, keeps the last good config otherwise. */
  reload(): Promise<ReloadResult>;
  /** Reloads that found an invalid or unreadable config (each distinct content counted once). */
  readonly failures: number;
}

/** The kube-dns layout: `--server` rules, then the ConfigMap's stub domains and upstreams, then resolv.conf. */
function kubeDnsSources(raw: RawConfig, rules: readonly ServerRule[]): RouteSources {
  const config = parseKubeDnsConfig(raw.data);
  return {
    rules,
    stubDomains: config.stubDomains,
    upstreamNameservers: config.upstreamNameservers,
    resolvConf: raw.resolvConf,
    clientLimits: config.clientLimits,
  };
}

/** What the kube-dns layout runs on before any valid ConfigMap: the `--server` rules and resolv.conf. */
const kubeDnsDefaults = (raw: RawConfig, rules: readonly ServerRule[]): RouteSources => ({
  rules,
  stubDomains: new Map(),
  upstreamNameservers: [],
  resolvConf: raw.resolvConf,
});

/**
 * The kube-dns ConfigMap, as dnsmasq-nanny applies it but without a restart: a valid new
 * (stubDomains, upstreamNameservers, resolv.conf) set replaces the route table at once; an
 * invalid one is logged once per content and counted, and the last good table stays. Until a
 * valid config has been seen, "the last good one" is the defaults (`--server` rules and
 * resolv.conf), never less: a ConfigMap that is bad when the forwarder starts must not leave it
 * without upstreams. No I/O of its own: `read` is injected.
 */
export function createConfigReloader<P>(deps: ConfigReloaderDeps<P>): ConfigReloader<P> {
  let routes = new RouteTable({ rules: deps.rules, stubDomains: new Map(), upstreamNameservers: [], resolvConf: [] });
  let version = '';
  let failures = 0;
  let sawValid = false;
  let clientLimits: Readonly<Partial<ClientLimits>> = {};
  let plugins = deps.noPlugins;
  const isSelf = deps.isSelf ?? (() => false);
  /** Checks what was read for loops and turns it into routes; throws ConfigError on an invalid config. */
  const build = (sources: Configured<P>): RouteTable & { limits: Readonly<Partial<ClientLimits>>; plugins: P } => {
    if (sources.upstreamNameservers.some(isSelf))
      throw new ConfigError('upstreamNameservers', 'names this forwarder itself (a forwarding loop)');
    for (const [domain, servers] of sources.stubDomains)
      if (servers.some(isSelf))
        throw new ConfigError('stubDomains', `${domain} names this forwarder itself (a forwarding loop)`);
    // `--server` flags are checked at start; a config file's rules here. A Corefile block that
    // forwards to this forwarder itself would loop: that server is dropped (its names, with no
    // other server, get SERVFAIL) and the rest of the Corefile runs, as CoreDNS's would.
    let rules = sources.rules;
    if (deps.routesFrom && rules.some((r) => r.servers.some(isSelf))) {
      rules = rules.map((r) => {
        if (!r.servers.some(isSelf)) return r;
        deps.log.error(
          'a Corefile block forwards to this forwarder itself (a forwarding loop): that server is not asked',
          {
            zones: r.domains.length ? r.domains : ['.'],
            servers: r.servers.filter(isSelf),
          },
        );
        const others = r.servers.filter((s) => !isSelf(s));
        return others.length ? { ...r, servers: others } : { ...r, servers: [], unserved: true as const };
      });
    }
    const resolvConf = sources.resolvConf.filter((s) => !isSelf(s));
    if (resolvConf.length < sources.resolvConf.length)
      deps.log.warn('ignoring a resolv.conf nameserver that is this forwarder itself', {
        skipped: sources.resolvConf.filter(isSelf),
      });
    return Object.assign(new RouteTable({ ...sources, rules, resolvConf }), {
      limits: sources.clientLimits ?? {},
      plugins: sources.plugins ?? deps.noPlugins,
    });
  };
  /** The defaults, built from what was read (its resolv.conf), or undefined if even they are invalid. */
  const defaultsOf = (raw: RawConfig): ReturnType<typeof build> | undefined => {
    try {
      return build(deps.defaultsFrom ? deps.defaultsFrom(raw) : kubeDnsDefaults(raw, deps.rules));
    } catch (error) {
      deps.log.error('the defaults are invalid too', { err: error });
      return undefined;
    }
  };
  return {
    routes: () => routes,
    plugins: () => plugins,
    clientLimits: () => clientLimits,
    get failures() {
      return failures;
    },
    async reload() {
      let raw: RawConfig;
      try {
        raw = await deps.read();
      } catch (error) {
        failures++;
        deps.log.error('cannot read the config; keeping the last good one', { err: error });
        return 'unreadable';
      }
      if (raw.version === version) return 'unchanged';
      version = raw.version;
      let next: ReturnType<typeof build>;
      try {
        next = build(deps.routesFrom ? deps.routesFrom(raw) : kubeDnsSources(raw, deps.rules));
      } catch (error) {
        failures++;
        const defaults = sawValid ? undefined : defaultsOf(raw);
        if (!defaults) {
          deps.log.error('invalid config; keeping the last good one', { err: error, version: raw.version });
          return 'invalid';
        }
        routes = defaults;
        plugins = defaults.plugins;
        clientLimits = defaults.limits;
        deps.onLimits?.(clientLimits);
        deps.log.error('invalid config and no good one before it: running on the defaults until a valid one comes', {
          err: error,
          version: raw.version,
          routes: defaults.describe(),
        });
        return 'invalid';
      }
      sawValid = true;
      const previous = routes;
      routes = next;
      plugins = next.plugins;
      clientLimits = next.limits;
      deps.onLimits?.(clientLimits);
      const fields = deps.onApplied?.(next, previous, plugins);
      deps.log.info('config applied', {
        version: raw.version,
        routes: next.describe(),
        ...(Object.keys(clientLimits).length > 0 ? { clientLimits } : {}),
        ...fields,
      });
      return 'applied';
    },
  };
}
