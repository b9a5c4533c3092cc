import { rm, writeFile } from 'node:fs/promises';
import { type Logger, labelledFrom, ServerCore } from '@cluster-dns/runtime';
import { reusePortSupported, udpPortInUse } from '@cluster-dns/wire';
import { Registry } from 'prom-client';
import { defaultWorkers, readCpuBudget } from '../workers/cpu-budget.js';
import { type Launched, launchForwarder } from '../workers/launcher.js';
import { checkWorkers } from '../workers/worker-pool.js';
import { localIpsOf, type NodeCacheValues } from './node-cache-options.js';
import { type CommandRunner, detectFirewall, NodePlumbing, type SetupErrorType } from './node-plumbing.js';
import { nodeCacheForwarder } from './setup.js';

export interface NodeCacheDeps {
  log: Logger;
  run: CommandRunner;
  /** The process's environment: `<UPSTREAMSVC>_SERVICE_HOST` is read from it. */
  env: Readonly<Record<string, string | undefined>>;
}

export interface NodeCache {
  readonly forwarder: Launched;
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
  const workers = workersOf(values, log);
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
  /**
   * Whether another instance (a hand-over's newer one) serves the local IPs. Ours may linger a
   * moment after our lanes exit, on a loaded node, so in use means in use throughout a second:
   * free at any look, and no one serves. A real successor holds the port the whole time.
   */
  const anotherServes = async () => {
    for (let look = 0; look < 10; look++) {
      let inUse = false;
      for (const ip of plan.listenAddresses) if (await udpPortInUse(ip, plan.port)) inUse = true;
      if (!inUse) return false;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    return true;
  };
  let forwarder: Launched | undefined;
  try {
    count((await plumbing.ensureInterface()).errors);
    forwarder = launchForwarder({
      program: 'node-cache',
      options,
      config,
      workers,
      workersFlag: '-workers',
      metricsFlags: 'the Corefile’s prometheus',
      // One worker keeps its answers in the same store as many do: bounded by bytes, and without a
      // JavaScript object per answer (bench case 11).
      sharedStoreAlone: true,
      health: plan.health,
      log,
    });
    const running = forwarder;
    const started = await running.start();
    const healthPort = started.healthPort;
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

/** -workers: as given, or (0) one per core where SO_REUSEPORT works, as CoreDNS's multisocket does. */
/** -workers, or by default as many as the CPU given allows (workers/cpu-budget.ts), said in the log. */
function workersOf(values: NodeCacheValues, log: Logger): number {
  checkWorkers('-workers', values.workers);
  if (values.workers) return values.workers;
  if (!reusePortSupported()) return 1;
  const budget = readCpuBudget();
  const workers = defaultWorkers(budget);
  log.info('workers from the CPU given', {
    workers,
    quotaCores: budget.quotaCores ?? 'none',
    affinity: budget.affinity,
  });
  return workers;
}
