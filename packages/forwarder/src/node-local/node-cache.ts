import { existsSync } from 'node:fs';
import { rm, writeFile } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import {
  ConfigError,
  type HostPort,
  type Logger,
  labelledFrom,
  parseKubeDnsConfig,
  readCorefile,
  ServerCore,
  toTcpBackpressure,
} from '@cluster-dns/runtime';
import { reusePortSupported, udpPortInUse } from '@cluster-dns/wire';
import { Registry } from 'prom-client';
import type { RawConfig } from '../config-source.js';
import { readConfigSources } from '../config-source.js';
import { createForwarder, type ForwarderDeps } from '../forwarder.js';
import { toIsolationOptions } from '../isolation/isolation-flags.js';
import type { ForwarderOptions } from '../options.js';
import type { RouteSources } from '../route-table.js';
import type { Serving } from '../serving.js';
import { checkWorkers, createWorkerPool } from '../workers/worker-pool.js';
import { PLACEHOLDER, renderCorefile, serviceHostVariable } from './corefile-template.js';
import { localIpsOf, type NodeCacheValues } from './node-cache-options.js';
import { type NodeLocalPlan, planNodeLocal } from './node-local-plan.js';
import { type CommandRunner, detectFirewall, NodePlumbing, type SetupErrorType } from './node-plumbing.js';

export interface NodeCacheDeps {
  log: Logger;
  run: CommandRunner;
  /** The process's environment: `<UPSTREAMSVC>_SERVICE_HOST` is read from it. */
  env: Readonly<Record<string, string | undefined>>;
  /** The process's flags as given: each worker (-workers) parses them again. */
  argv: readonly string[];
}

export interface NodeCache {
  readonly forwarder: Serving;
  readonly plumbing: NodePlumbing;
  /** Where each listener ended up (port 0 in tests picks free ones). */
  readonly ports: { dns: number; metrics: number; health: number | undefined; setupMetrics: number };
  shutdown(): Promise<void>;
}

const SETUP_ERRORS: readonly SetupErrorType[] = [
  'interface_add',
  'interface_check',
  'iptables',
  'iptables_lock',
  'nft',
];

/** The forwarder's routes from a rendered plan: zones as rules, the `.` block as the default route. */
function sourcesOf(
  plan: NodeLocalPlan,
  raw: RawConfig,
  resolvFile: string,
  clientLimits: RouteSources['clientLimits'],
): RouteSources {
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
    upstream: { forceTcp: root?.forceTcp ?? false, cache: root?.cache ?? 'off', policy: root?.policy ?? 'random' },
    clientLimits,
  };
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
  deps: { log: Logger; env: NodeCacheDeps['env']; writeRendered: boolean },
): Promise<NodeCacheForwarder> {
  const { log } = deps;
  const localIps = localIpsOf(values);
  const basePath = values.basecorefile;
  const kubeDnsDir = values.kubednscm || (existsSync('/etc/kube-dns') ? '/etc/kube-dns' : '');
  const resolvFile = values['resolv-file'];
  const serviceVar = serviceHostVariable(values.upstreamsvc);
  const clusterDns = deps.env[serviceVar];

  let lastText = '';
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
    return { text, plan: planNodeLocal(readCorefile(text, { source: basePath, mode: 'node-local' }), basePath) };
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

  const options: ForwarderOptions = {
    rules: [],
    listenAddresses: plan.listenAddresses,
    port: plan.port,
    resolvFile,
    cacheSize: values['cache-size'] || Math.max(plan.cacheSize, 1),
    negativeCache: true,
    negTtlSeconds: 0,
    minCacheTtlSeconds: 0,
    maxCacheTtlSeconds: 0,
    // CoreDNS's forward has no limit by default; this one only sheds a flood.
    forwardMax: plan.forwardMax ?? 2000,
    isolation: toIsolationOptions(values),
    loopDetect: plan.loopDetect,
    // The node's own resolver on loopback (systemd-resolved's 127.0.0.53) is asked over kept sockets.
    keptLoopbackSockets: true,
    randomCase: false,
    logQueries: plan.logQueries,
    configDir: kubeDnsDir,
    // node-cache re-reads both ConfigMaps every 10 s (DefaultConfigSyncPeriod).
    configPollMs: 10_000,
    upstreamTimeoutMs: 2_000,
    forwardDeadlineMs: 5_000,
    maxTcpConnections: 5000,
    maxTcpConnectionsPerClient: 100,
    tcpIdleTimeoutMs: 30_000,
    tcpBackpressure: toTcpBackpressure(values),
    ednsPacketMax: 1232,
    metricsPort: plan.metrics?.port ?? 0,
    metricsAddress: plan.metrics?.host ?? '127.0.0.1',
    soaCheckMs: 5_000,
    // CoreDNS serves nothing stale unless told (serve_stale).
    maxStaleSeconds: 0,
    staleServerRoutes: false,
    prefetchHits: plan.prefetchHits ?? 0,
    lameduckMs: plan.lameduckMs ?? values.lameduck,
    // A new instance binds beside this one and takes over with no gap (see shutdown below).
    reusePort: reusePortSupported(),
    // A node cache relays no transfers; it takes NOTIFY on the node's address.
    transferRelayFrom: [],
    listenFlags: '-localip and the Corefile’s port',
    ...(values['notify-listen-address'] ? { notifyListen: values['notify-listen-address'] } : {}),
  };
  const config = {
    files: [basePath],
    routesFrom: (raw: RawConfig) => {
      const next = planOf(raw);
      const fixed = (p: NodeLocalPlan) => JSON.stringify([p.listenAddresses, p.port, p.metrics, p.health, p.cacheSize]);
      if (fixed(next.plan) !== fixed(plan))
        log.warn(
          'the Corefile changed its binds, port, prometheus, health or cache sizes: those apply at the next restart',
        );
      void writeRendered(next.text);
      return sourcesOf(next.plan, raw, resolvFile, parseKubeDnsConfig(raw.data).clientLimits);
    },
    defaultsFrom: (raw: RawConfig) => sourcesOf(planOf(raw, false).plan, raw, resolvFile, {}),
  };
  return { plan, options, config };
}

/** What runs the DNS side: one forwarder in this thread, or a pool of workers. */

/** -workers: as given, or (0) one per core where SO_REUSEPORT works, as CoreDNS's multisocket does. */
function workersOf(values: NodeCacheValues): number {
  checkWorkers('-workers', values.workers);
  return values.workers || (reusePortSupported() ? availableParallelism() : 1);
}

/**
 * Node-local mode: the forwarder run as NodeLocal DNSCache's node-cache is. Its flags, its
 * Corefile (nodeCacheForwarder), the link and rules on the node (node-plumbing.ts), health and
 * metrics where node-cache has them. Order at start, as node-cache: the link first (the local IPs
 * must exist to be bound), then the listeners, then the rules, so no rule ever points at a cache
 * that is not answering.
 */
export async function startNodeCache(values: NodeCacheValues, deps: NodeCacheDeps): Promise<NodeCache> {
  const { log } = deps;
  const localIps = localIpsOf(values);
  const workers = workersOf(values);
  const { plan, options, config } = await nodeCacheForwarder(values, { log, env: deps.env, writeRendered: true });

  const firewall = values.firewall === 'auto' ? await detectFirewall(deps.run, localIps) : values.firewall;
  const plumbing = new NodePlumbing(
    {
      localIps,
      port: plan.port,
      healthPort: values['health-port'],
      interfaceName: values.interfacename,
      interfaceType: values['interface-type'],
      setupInterface: values.setupinterface,
      setupRules: values.setupiptables,
      firewall,
    },
    deps.run,
    log,
  );
  const setupErrors = new Map<SetupErrorType, number>(SETUP_ERRORS.map((t) => [t, 0]));
  const count = (errors: readonly SetupErrorType[]) => {
    for (const e of errors) setupErrors.set(e, (setupErrors.get(e) ?? 0) + 1);
  };

  // The node cache's own endpoints (health, setup metrics) and what it holds (the sync, the pidfile)
  // on a server core of their own: the forwarder's lameduck is its own, so none waits here.
  const server = new ServerCore({ log, lameduckMs: 0, lameduck: 'always' });
  const { closers } = server;
  // Ours are closed by then: a bind that fails means a newer instance took over (SO_REUSEPORT).
  const anotherServes = async () => {
    for (const ip of plan.listenAddresses) if (await udpPortInUse(ip, plan.port)) return true;
    return false;
  };
  let forwarder: Serving | undefined;
  try {
    count((await plumbing.ensureInterface()).errors);
    forwarder =
      workers > 1
        ? createWorkerPool({
            kind: 'node-cache',
            program: 'node-cache',
            argv: deps.argv,
            count: workers,
            addresses: options.listenAddresses,
            port: options.port,
            ...(options.notifyListen ? { notifyPort: options.notifyListen.port } : {}),
            metrics: { address: options.metricsAddress, port: options.metricsPort, flags: 'the Corefile’s prometheus' },
            reusePort: options.reusePort,
            log,
          })
        : createForwarder(options, { log, config });
    const running = forwarder;
    const started = await running.start();

    let healthPort: number | undefined;
    if (plan.health) {
      const health = await server.listenHttp(
        'health',
        plan.health.host,
        plan.health.port,
        { '/health': () => ({ status: 200, body: 'OK' }) },
        { flags: 'the Corefile’s health', reusePort: options.reusePort },
      );
      healthPort = health.port;
    }
    const registry = new Registry();
    labelledFrom(
      registry,
      'coredns_nodecache_setup_errors_total',
      'Errors setting up the node’s interface and rules, by type (node-cache’s metric).',
      ['errortype'],
      () => [...setupErrors].map(([errortype, n]): [Record<string, string>, number] => [{ errortype }, n]),
    );
    const setupAddress = values['metrics-listen-address'];
    const setupMetrics = await server.listenHttp(
      'setup metrics',
      setupAddress.host,
      setupAddress.port,
      { '/metrics': async () => ({ status: 200, body: await registry.metrics(), contentType: registry.contentType }) },
      { flags: '-metrics-listen-address', reusePort: options.reusePort },
    );

    count((await plumbing.ensureRules()).errors);
    const tick = setInterval(() => {
      void plumbing.sync().then((report) => count(report.errors));
    }, values.syncinterval);
    tick.unref();
    closers.push('sync', () => clearInterval(tick));
    if (values.pidfile !== '') {
      await writeFile(values.pidfile, `${process.pid}\n`);
      const pidfile = values.pidfile;
      closers.push('pidfile', () => rm(pidfile, { force: true }));
    }
    log.info('node cache ready', {
      localIps,
      firewall,
      interface: values.setupinterface ? values.interfacename : undefined,
      syncIntervalMs: values.syncinterval,
    });
    const ports = {
      dns: started.port,
      metrics: started.metricsPort,
      health: healthPort,
      setupMetrics: setupMetrics.port,
    };
    return {
      forwarder: running,
      plumbing,
      ports,
      async shutdown() {
        // The forwarder's lameduck and drain first, health still answering; the rules go only
        // once nothing answers.
        await running.shutdown();
        await server.shutdown();
        if (values.skipteardown) log.info('leaving the interface and rules in place (-skipteardown)');
        else if (await anotherServes())
          log.info('another instance serves the local IPs: leaving the interface and rules to it');
        else await plumbing.teardown();
      },
    };
  } catch (error) {
    await server.shutdown();
    await forwarder?.shutdown().catch(() => undefined);
    // A start that failed (its port held by an instance without SO_REUSEPORT) leaves that one's setup.
    if (!values.skipteardown && !(await anotherServes())) await plumbing.teardown();
    throw error;
  }
}
