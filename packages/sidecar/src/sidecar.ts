import { type Logger, ServerCore } from '@cluster-dns/runtime';
import { Registry } from 'prom-client';
import { type RunningProbe, startProbe } from './dns-probe.js';
import { startDnsmasqPoller } from './dnsmasq-stats.js';
import { createHttpApp } from './http-app.js';
import { createSidecarMetrics } from './metrics.js';
import type { SidecarOptions } from './options.js';

export interface Sidecar {
  start(): Promise<{ port: number }>;
  shutdown(): Promise<void>;
  readonly probes: readonly RunningProbe[];
}

/** The sidecar container: probes, the forwarder statistics poll, and the HTTP endpoints. */
export function createSidecar(options: SidecarOptions, deps: { log: Logger; random?: () => number }): Sidecar {
  const registry = new Registry();
  const metrics = createSidecarMetrics(registry, options.namespace, options.probes);
  // No DNS listener and no readiness of its own: nothing to wait out at shutdown.
  const server = new ServerCore({ log: deps.log, lameduckMs: 0, lameduck: 'always' });
  const { closers } = server;
  const probes: RunningProbe[] = [];
  return {
    probes,
    async start() {
      for (const spec of options.probes) {
        const probe = startProbe(spec, { metrics, log: deps.log, random: deps.random });
        probes.push(probe);
        closers.push(`probe ${spec.label}`, () => probe.stop());
      }
      const poller = startDnsmasqPoller({
        server: options.dnsmasq,
        intervalMs: options.pollIntervalMs,
        metrics,
        log: deps.log,
      });
      closers.push('dnsmasq poll', () => poller.stop());
      const app = createHttpApp({ probes, registry, metricsPath: options.metricsPath });
      // Closed first (reverse order), draining: a scrape or kubelet probe in flight still gets its answer.
      const http = await server.listenHttp('http', options.httpHost, options.httpPort, app, {
        flags: '--prometheus-addr, --prometheus-port',
        drainMs: 2000,
      });
      const port = http.port;
      deps.log.info('ready', { port, probes: options.probes.map((p) => p.label), metricsPath: options.metricsPath });
      return { port };
    },
    shutdown: () => server.shutdown(),
  };
}
