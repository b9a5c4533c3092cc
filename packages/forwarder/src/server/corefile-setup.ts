import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import {
  type FlagValues,
  type HostPort,
  importsFingerprint,
  type Logger,
  originText,
  parseHostPort,
  readCorefile,
} from '@cluster-dns/runtime';
import type { Configured } from '../config/config-reloader.js';
import type { RawConfig } from '../config/config-source.js';
import { type ForwarderOptions, type forwarderFlags, resolvSearchOf, toForwarderOptions } from '../options.js';
import { type BlockPlugins, readBlockPlugins } from './block-plugins.js';
import { withProcessPlan } from './corefile-plan.js';
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

/** A file's text as read with the config, or (a file named since, or an $INCLUDE) from the disk now. */
export function fileReader(raw: RawConfig): (path: string) => string | undefined {
  return (path) => {
    const read = raw.files?.get(path);
    if (read !== undefined) return read;
    try {
      return readFileSync(path, 'utf8');
    } catch {
      return undefined;
    }
  };
}

/** The routes of a plan, and its blocks' plugins built from the files read. */
function sourcesOf(plan: PodPlan, raw: RawConfig): Configured<BlockPlugins> {
  const root = plan.root;
  const rootServers = root && Array.isArray(root.servers) ? (root.servers as readonly HostPort[]) : undefined;
  return {
    rules: [...plan.rules, ...(rootServers ? [{ domains: [], servers: rootServers }] : [])],
    stubDomains: new Map(),
    upstreamNameservers: [],
    resolvConf: root && !rootServers ? raw.resolvConf : [],
    upstream: {
      forceTcp: root?.forceTcp ?? false,
      cache: root?.cache ?? 'off',
      policy: root?.policy ?? 'random',
      upstream: root?.upstream,
    },
    loadbalance: plan.loadbalance,
    plugins: readBlockPlugins(plan, fileReader(raw)),
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
  deps: { log: Logger; env?: Readonly<Record<string, string | undefined>> },
): Promise<CorefileForwarder> {
  const path = values.corefile;
  const recordBuilder = parseHostPort(values['kubernetes-server'], 53, '--kubernetes-server');
  const warned = new Set<string>();
  const planOf = (text: string) =>
    planPod(
      readCorefile(text, {
        source: path,
        mode: 'pod',
        ...(deps.env ? { env: deps.env } : {}),
        onWarning: (w) => {
          // Each warning once per process, however often the file is read again.
          const line = `${originText(w)}: ${w.message}`;
          if (warned.has(line)) return;
          warned.add(line);
          deps.log.warn('Corefile', { at: originText(w), warning: w.message });
        },
      }),
      recordBuilder,
      path,
    );
  const plan = planOf(await readFile(path, 'utf8'));
  const flags = toForwarderOptions(values);
  const watched = [...new Set([...plan.hosts.map((h) => h.file), ...plan.files.map((f) => f.file)])];
  const fileReloadMs = [...plan.hosts.map((h) => h.reloadMs), ...plan.files.map((f) => f.reloadMs)].filter(
    (ms) => ms > 0,
  );
  const options: ForwarderOptions = {
    ...withProcessPlan(flags, plan, `${path}: its server blocks' keys and bind`),
    resolvFile: resolvFileOf(plan),
    // The kube-dns ConfigMap has no part in Corefile mode: the Corefile says it all.
    configDir: '',
    configPollMs: Math.min(plan.reloadMs ?? 30_000, ...fileReloadMs),
    // CoreDNS serves nothing stale unless told (serve_stale).
    maxStaleSeconds: plan.maxStaleSeconds,
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
      p.moreListeners,
      p.metrics,
      p.health,
      p.cacheSize,
      resolvFileOf(p),
      p.hosts.map((h) => h.file),
      p.files.map((f) => f.file),
    ]);
  const config = {
    files: [path, ...watched],
    // AKS's and k3s's coredns-custom arrive through imports: a change there is a change too.
    versionOf: (files: ReadonlyMap<string, string>) =>
      importsFingerprint(files.get(path) ?? '', path, deps.env ? { env: deps.env } : {}),
    routesFrom: (raw: RawConfig) => {
      const next = planOf(raw.files?.get(path) ?? '');
      if (fixed(next) !== fixed(plan))
        deps.log.warn(
          'the Corefile changed its binds, port, prometheus, health, cache size, resolv.conf, hosts or zone files: those apply at the next restart',
        );
      return sourcesOf(next, raw);
    },
    // Checked at start: what a Corefile broken before the first reload falls back to.
    defaultsFrom: (raw: RawConfig) => sourcesOf(plan, raw),
  };
  return { plan, options, config };
}
