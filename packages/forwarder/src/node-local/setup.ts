import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import {
  ConfigError,
  type HostPort,
  importsFingerprint,
  type Logger,
  originText,
  parseFlags,
  parseKubeDnsConfig,
  readCorefile,
  toTcpBackpressure,
  validateCorefile,
} from '@cluster-dns/runtime';
import { type Fqdn, reusePortSupported } from '@cluster-dns/wire';
import type { Configured } from '../config/config-reloader.js';
import type { RawConfig } from '../config/config-source.js';
import { readConfigSources } from '../config/config-source.js';
import { toIsolationOptions } from '../isolation/isolation-flags.js';
import { domainOf, type ForwarderOptions, forwarderFlags, resolvSearchOf, toForwarderOptions } from '../options.js';
import { type BlockPlugins, readBlockPlugins } from '../server/block-plugins.js';
import { withProcessPlan } from '../server/corefile-plan.js';
import { fileReader } from '../server/corefile-setup.js';
import type { ForwarderDeps } from '../server/forwarder.js';
import { PLACEHOLDER, renderCorefile, serviceHostVariable } from './corefile-template.js';
import { localIpsOf, type NodeCacheValues } from './node-cache-options.js';
import { type NodeLocalPlan, planNodeLocal } from './node-local-plan.js';

// Node-local mode's setup, as CoreDNS's setup.go builds a plugin: node-cache's flags and the
// Corefile they name are read (parse), then the forwarder's options and routes are made from them
// (build). A pool's lanes (-workers) build nothing: they answer from the main thread's cache.

/** The forwarder's routes from a rendered plan: zones as rules, the `.` block as the default route. */
function sourcesOf(
  plan: NodeLocalPlan,
  raw: RawConfig,
  resolvFile: string,
  clientLimits: Configured<BlockPlugins>['clientLimits'],
): Configured<BlockPlugins> {
  const root = plan.root;
  const rootServers = root && Array.isArray(root.servers) ? (root.servers as readonly HostPort[]) : undefined;
  if (root && !rootServers) {
    const named = (root.servers as { resolvFile: string }).resolvFile;
    if (named !== resolvFile)
      throw new ConfigError('Corefile', `forward . ${named}: only ${resolvFile} (-resolv-file) is read for upstreams`);
  }
  return {
    rules: [...plan.rules, ...(rootServers ? [{ domains: [], servers: rootServers }] : [])],
    // Already blocks of the rendered Corefile, as node-cache makes them.
    stubDomains: new Map(),
    upstreamNameservers: [],
    resolvConf: root && !rootServers ? raw.resolvConf : [],
    upstream: {
      forceTcp: root?.forceTcp ?? false,
      cache: root?.cache ?? 'off',
      policy: root?.policy ?? 'random',
      upstream: root?.upstream,
    },
    clientLimits,
    plugins: readBlockPlugins(plan, fileReader(raw)),
  };
}

/**
 * `-validate`: the Corefile filled as node-cache fills it (the kube-dns ConfigMap's stub domains,
 * the cluster DNS's address from the environment), read as node-local mode reads it.
 */
export async function validateNodeCacheCorefile(
  values: NodeCacheValues,
  io: { env: Readonly<Record<string, string | undefined>>; stdout(text: string): void; stderr(text: string): void },
): Promise<number> {
  const kubeDnsDir = values.kubednscm || (existsSync('/etc/kube-dns') ? '/etc/kube-dns' : '');
  const raw = await readConfigSources(kubeDnsDir, values['resolv-file'], [values.basecorefile]).catch(
    (error: unknown) => error as Error,
  );
  if (raw instanceof Error) {
    io.stderr(`${values.basecorefile}: ${raw.message}\n`);
    return 2;
  }
  const text = renderCorefile(raw.files?.get(values.basecorefile) ?? '', {
    localIps: localIpsOf(values),
    port: 53,
    clusterDns: io.env[serviceHostVariable(values.upstreamsvc)],
    kubeDns: parseKubeDnsConfig(raw.data),
    resolvFile: values['resolv-file'],
  });
  return validateCorefile(text, values.conf !== '' ? values.conf : values.basecorefile, {
    mode: 'node-local',
    env: io.env,
    stdout: io.stdout,
    stderr: io.stderr,
  });
}

/** The forwarder of node-local mode, as the main thread and each worker (--workers) build it. */
export interface NodeCacheForwarder {
  plan: NodeLocalPlan;
  options: ForwarderOptions;
  config: NonNullable<ForwarderDeps['config']>;
}

/**
 * The forwarder's options and routes from node-cache's flags and the Corefile (filled as node-cache
 * fills it, and read again with the kube-dns ConfigMap every 10 s). `writeRendered`: whether this
 * one writes the filled-in Corefile to -conf (one writer per process).
 */
export async function nodeCacheForwarder(
  values: NodeCacheValues,
  deps: { log: Logger; env: Readonly<Record<string, string | undefined>>; writeRendered: boolean },
): Promise<NodeCacheForwarder> {
  const { log } = deps;
  const localIps = localIpsOf(values);
  const basePath = values.basecorefile;
  const readAs = values.conf !== '' ? values.conf : basePath;
  const kubeDnsDir = values.kubednscm || (existsSync('/etc/kube-dns') ? '/etc/kube-dns' : '');
  const resolvFile = values['resolv-file'];
  const serviceVar = serviceHostVariable(values.upstreamsvc);
  const clusterDns = deps.env[serviceVar];

  let lastText = '';
  const warned = new Set<string>();
  // `withKubeDns` false: the Corefile alone, as when the kube-dns ConfigMap is invalid and no valid
  // one was seen yet (node-cache then runs without its stub domains too).
  const planOf = (raw: RawConfig, withKubeDns = true) => {
    const base = raw.files?.get(basePath) ?? '';
    const text = renderCorefile(base, {
      localIps,
      port: 53,
      clusterDns,
      kubeDns: withKubeDns ? parseKubeDnsConfig(raw.data) : parseKubeDnsConfig(new Map()),
      resolvFile,
    });
    if (text.includes(PLACEHOLDER.clusterDns))
      throw new ConfigError(
        'Corefile',
        `${PLACEHOLDER.clusterDns} is used but ${serviceVar} is not set (-upstreamsvc ${values.upstreamsvc}: the kubelet sets it for a Service that exists when the Pod starts)`,
      );
    const servers = readCorefile(text, {
      // Node-cache's CoreDNS reads the filled-in copy (-conf): its relative imports are from there.
      source: readAs,
      mode: 'node-local',
      env: deps.env,
      onWarning: (w) => {
        // Each warning once per process, however often the file is read again.
        const line = `${originText(w)}: ${w.message}`;
        if (warned.has(line)) return;
        warned.add(line);
        log.warn('Corefile', { at: originText(w), warning: w.message });
      },
    });
    return { text, plan: planNodeLocal(servers, basePath) };
  };
  const writeRendered = async (text: string) => {
    if (!deps.writeRendered || text === lastText || values.conf === '') return;
    lastText = text;
    await writeFile(values.conf, text).catch((error: unknown) =>
      log.warn('could not write the filled-in Corefile (it is only for reading)', { path: values.conf, err: error }),
    );
  };

  const initial = await readConfigSources(kubeDnsDir, resolvFile, [basePath]);
  let kubeDnsValid = true;
  try {
    parseKubeDnsConfig(initial.data);
  } catch (error) {
    kubeDnsValid = false;
    log.error('invalid kube-dns ConfigMap at start: running on the Corefile alone until a valid one comes', {
      err: error,
      path: kubeDnsDir,
    });
  }
  const { plan, text } = planOf(initial, kubeDnsValid);
  await writeRendered(text);

  // The forwarder's own defaults, with node-cache's flags and what NodeLocal DNSCache does otherwise.
  const nodeCache: ForwarderOptions = {
    ...toForwarderOptions(parseFlags(forwarderFlags, []).values),
    isolation: toIsolationOptions(values),
    tcpBackpressure: toTcpBackpressure(values),
    lameduckMs: values.lameduck,
    metricsPort: 0,
    metricsAddress: '127.0.0.1',
    // CoreDNS's forward has no limit by default; this one only sheds a flood.
    forwardMax: 2000,
    // node-cache's timings: CoreDNS's forward dial and read timeouts.
    upstreamTimeoutMs: 2_000,
    forwardDeadlineMs: 5_000,
    // CoreDNS serves nothing stale unless told (serve_stale).
    maxStaleSeconds: 0,
  };
  const options: ForwarderOptions = {
    ...withProcessPlan(nodeCache, plan, '-localip and the Corefile’s port'),
    resolvFile,
    cacheSize: values['cache-size'] || Math.max(plan.cacheSize, 1),
    configDir: kubeDnsDir,
    // node-cache re-reads both ConfigMaps every 10 s (DefaultConfigSyncPeriod).
    configPollMs: 10_000,
    // A new instance binds beside this one and takes over with no gap (see shutdown below).
    reusePort: reusePortSupported(),
    namespaceSeries: values['namespace-metrics'],
    ...(values['notify-listen-address'] ? { notifyListen: values['notify-listen-address'] } : {}),
    ...(values.autopath
      ? { autopath: { zone: domainOf(values.autopath, '-autopath') as Fqdn, extraSearch: resolvSearchOf(resolvFile) } }
      : {}),
  };
  // The cluster's DNS learns which pod asked (wire's CLIENT_ADDRESS_OPTION) on the blocks that
  // forward to it, and only those: a stub domain's or the upstreams' servers never see it.
  const carryClientTo = values['carry-client-address'] && clusterDns !== undefined ? [clusterDns] : [];
  const watched = [...new Set([...plan.hosts.map((h) => h.file), ...plan.files.map((f) => f.file)])];
  const config = {
    files: [basePath, ...watched],
    versionOf: (files: ReadonlyMap<string, string>) =>
      importsFingerprint(files.get(basePath) ?? '', readAs, { env: deps.env }),
    routesFrom: (raw: RawConfig) => {
      const next = planOf(raw);
      const fixed = (p: NodeLocalPlan) => JSON.stringify([p.listenAddresses, p.port, p.metrics, p.health, p.cacheSize]);
      if (fixed(next.plan) !== fixed(plan))
        log.warn(
          'the Corefile changed its binds, port, prometheus, health or cache sizes: those apply at the next restart',
        );
      void writeRendered(next.text);
      return { ...sourcesOf(next.plan, raw, resolvFile, parseKubeDnsConfig(raw.data).clientLimits), carryClientTo };
    },
    defaultsFrom: (raw: RawConfig) => ({ ...sourcesOf(planOf(raw, false).plan, raw, resolvFile, {}), carryClientTo }),
  };
  return { plan, options, config };
}

/** What runs the DNS side: one forwarder in this thread, or a pool of workers. */
