import { ConfigError, type HostPort, type Logger, parseKubeDnsConfig } from '@cluster-dns/runtime';
import type { RawConfig } from './config-source.js';
import { RouteTable } from './route-table.js';
import type { ServerRule } from './server-flag.js';

export type ReloadResult = 'applied' | 'unchanged' | 'invalid' | 'unreadable';

export interface ConfigReloaderDeps {
  /** Reads the ConfigMap folder and the resolv file (config-source.ts in the process). */
  read(): Promise<RawConfig>;
  /** The `--server` rules, fixed for the process's life. */
  rules: readonly ServerRule[];
  log: Logger;
  /** True for a server that is this forwarder itself: refused in the ConfigMap, skipped in resolv.conf. */
  isSelf?(server: HostPort): boolean;
  /** Told of each new route table that replaced the previous one; may add fields to the log line. */
  onApplied?(next: RouteTable, previous: RouteTable): Record<string, unknown> | undefined;
}

export interface ConfigReloader {
  /** The routes in force. */
  routes(): RouteTable;
  /** Reads the sources again; applies a valid change, keeps the last good config otherwise. */
  reload(): Promise<ReloadResult>;
  /** Reloads that found an invalid or unreadable config (each distinct content counted once). */
  readonly failures: number;
}

/**
 * The kube-dns ConfigMap, as dnsmasq-nanny applies it but without a restart: a valid new
 * (stubDomains, upstreamNameservers, resolv.conf) set replaces the route table at once; an
 * invalid one is logged once per content and counted, and the last good table stays. No I/O of
 * its own: `read` is injected.
 */
export function createConfigReloader(deps: ConfigReloaderDeps): ConfigReloader {
  let routes = new RouteTable({ rules: deps.rules, stubDomains: new Map(), upstreamNameservers: [], resolvConf: [] });
  let version = '';
  let failures = 0;
  return {
    routes: () => routes,
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
      let next: RouteTable;
      try {
        const config = parseKubeDnsConfig(raw.data);
        const isSelf = deps.isSelf ?? (() => false);
        if (config.upstreamNameservers.some(isSelf))
          throw new ConfigError('upstreamNameservers', 'names this forwarder itself (a forwarding loop)');
        for (const [domain, servers] of config.stubDomains)
          if (servers.some(isSelf))
            throw new ConfigError('stubDomains', `${domain} names this forwarder itself (a forwarding loop)`);
        const resolvConf = raw.resolvConf.filter((s) => !isSelf(s));
        if (resolvConf.length < raw.resolvConf.length)
          deps.log.warn('ignoring a resolv.conf nameserver that is this forwarder itself', {
            skipped: raw.resolvConf.filter(isSelf),
          });
        next = new RouteTable({
          rules: deps.rules,
          stubDomains: config.stubDomains,
          upstreamNameservers: config.upstreamNameservers,
          resolvConf,
        });
      } catch (error) {
        failures++;
        deps.log.error('invalid config; keeping the last good one', { err: error, version: raw.version });
        return 'invalid';
      }
      const previous = routes;
      routes = next;
      const fields = deps.onApplied?.(next, previous);
      deps.log.info('config applied', { version: raw.version, routes: next.describe(), ...fields });
      return 'applied';
    },
  };
}
