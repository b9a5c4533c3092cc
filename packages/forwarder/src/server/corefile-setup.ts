import { readFile } from 'node:fs/promises';
import {
  ConfigError,
  type FlagValues,
  type HostPort,
  type Logger,
  parseHostPort,
  parseHostsText,
  readCorefile,
} from '@cluster-dns/runtime';
import type { Configured } from '../config/config-reloader.js';
import type { RawConfig } from '../config/config-source.js';
import { type ForwarderOptions, type forwarderFlags, resolvSearchOf, toForwarderOptions } from '../options.js';
import { HostsTable } from '../plugins/hosts/hosts-table.js';
import type { BlockPlugins } from './block-plugins.js';
import type { ForwarderDeps } from './forwarder.js';
import { type PodPlan, planPod } from './pod-plan.js';

/** The forwarder of Corefile mode, as the main thread and each worker (--workers) build it. */
export interface CorefileForwarder {
  plan: PodPlan;
  options: ForwarderOptions;
  config: NonNullable<ForwarderDeps['config']>;
}

const resolvFileOf = (plan: PodPlan) =>
  plan.root && !Array.isArray(plan.root.servers) ? (plan.root.servers as { resolvFile: string }).resolvFile : undefined;

/** The routes of a plan, with its hosts tables built from the files read. */
function sourcesOf(plan: PodPlan, raw: RawConfig): Configured<BlockPlugins> {
  const root = plan.root;
  const rootServers = root && Array.isArray(root.servers) ? (root.servers as readonly HostPort[]) : undefined;
  const hosts = plan.hosts.map((h) => {
    const text = raw.files?.get(h.file);
    if (text === undefined) throw new ConfigError('Corefile', `hosts ${h.file}: not read (a new file needs a restart)`);
    return new HostsTable(h, parseHostsText(text));
  });
  return {
    rules: [...plan.rules, ...(rootServers ? [{ domains: [], servers: rootServers }] : [])],
    stubDomains: new Map(),
    upstreamNameservers: [],
    resolvConf: root && !rootServers ? raw.resolvConf : [],
    upstream: {
      forceTcp: root?.forceTcp ?? false,
      cache: root?.cache ?? 'off',
      policy: root?.policy ?? 'random',
    },
    loadbalance: plan.loadbalance,
    plugins: { rewrites: plan.rewrites, hosts, acls: plan.acls },
  };
}

/**
 * Corefile mode: the forwarder configured by a CoreDNS Corefile (--corefile), as a CoreDNS Pod's
 * is, its kubernetes zones sent to the record-builder (--kubernetes-server). The Corefile (and
 * each hosts file) is read again every `reload` interval (every 30 s without one) and applied
 * without a restart; an invalid one is logged and counted and the last good one stays. Listeners,
 * health, prometheus, the cache's size and the files read apply at the next restart.
 */
export async function corefileForwarder(
  values: FlagValues<typeof forwarderFlags>,
  deps: { log: Logger },
): Promise<CorefileForwarder> {
  const path = values.corefile;
  const recordBuilder = parseHostPort(values['kubernetes-server'], 53, '--kubernetes-server');
  const planOf = (text: string) => planPod(readCorefile(text, { source: path, mode: 'pod' }), recordBuilder, path);
  const plan = planOf(await readFile(path, 'utf8'));
  const flags = toForwarderOptions(values);
  const hostsFiles = [...new Set(plan.hosts.map((h) => h.file))];
  const hostsReloadMs = plan.hosts.map((h) => h.reloadMs).filter((ms) => ms > 0);
  const options: ForwarderOptions = {
    ...flags,
    rules: [],
    listenAddresses: plan.listenAddresses,
    port: plan.port,
    resolvFile: resolvFileOf(plan),
    cacheSize: plan.cacheSize,
    // Each route carries its block's cache policy; these are what a route without one would take.
    negativeCache: true,
    negTtlSeconds: 0,
    minCacheTtlSeconds: 0,
    maxCacheTtlSeconds: 0,
    forwardMax: plan.forwardMax ?? flags.forwardMax,
    loopDetect: plan.loopDetect,
    logQueries: plan.logQueries || flags.logQueries,
    // The kube-dns ConfigMap has no part in Corefile mode: the Corefile says it all.
    configDir: '',
    configPollMs: Math.min(plan.reloadMs ?? 30_000, ...hostsReloadMs),
    metricsPort: plan.metrics?.port ?? flags.metricsPort,
    metricsAddress: plan.metrics?.host ?? flags.metricsAddress,
    // CoreDNS serves nothing stale unless told (serve_stale), and prefetches only with prefetch.
    maxStaleSeconds: plan.maxStaleSeconds,
    prefetchHits: plan.prefetchHits ?? 0,
    lameduckMs: plan.lameduckMs ?? flags.lameduckMs,
    listenFlags: `${path}: its server blocks' keys and bind`,
    ...(plan.clusterZone ? { clusterZone: plan.clusterZone } : {}),
    // autopath @kubernetes: the node's search domains from /etc/resolv.conf, as CoreDNS's (dnsPolicy Default).
    ...(plan.autopathZone
      ? { autopath: { zone: plan.autopathZone, extraSearch: resolvSearchOf(resolvFileOf(plan) ?? '/etc/resolv.conf') } }
      : {}),
  };
  const fixed = (p: PodPlan) =>
    JSON.stringify([
      p.listenAddresses,
      p.port,
      p.metrics,
      p.health,
      p.cacheSize,
      resolvFileOf(p),
      p.hosts.map((h) => h.file),
    ]);
  const config = {
    files: [path, ...hostsFiles],
    routesFrom: (raw: RawConfig) => {
      const next = planOf(raw.files?.get(path) ?? '');
      if (fixed(next) !== fixed(plan))
        deps.log.warn(
          'the Corefile changed its binds, port, prometheus, health, cache size, resolv.conf or hosts files: those apply at the next restart',
        );
      return sourcesOf(next, raw);
    },
    // Checked at start: what a Corefile broken before the first reload falls back to.
    defaultsFrom: (raw: RawConfig) => sourcesOf(plan, raw),
  };
  return { plan, options, config };
}
