import { type HostPort, type Logger, ServerCore } from '@cluster-dns/runtime';
import type { ForwarderOptions } from '../options.js';
import { sharedStoreFor } from '../plugins/cache/shared-answer-store.js';
import { createForwarder, type ForwarderDeps } from '../server/forwarder.js';
import type { ForwarderStarted, Serving } from '../server/serving.js';
import { checkWorkers, createWorkerPool, forwarderLeader } from './worker-pool.js';

export interface LaunchSpec {
  /** For logs and the pool's threads: `forwarder`, `node-cache`. */
  program: string;
  options: ForwarderOptions;
  /** Routes and plugins from a config file of another shape than kube-dns's (a Corefile). */
  config?: ForwarderDeps['config'];
  workers: number;
  /** The flag a bad worker count names (`--workers`, `-workers`). */
  workersFlag: string;
  /** What sets /metrics, for a bind error to name. */
  metricsFlags: string;
  /** Keep one worker's answers in the store a pool shares (bounded by bytes, no object per answer). */
  sharedStoreAlone?: boolean;
  /** A Corefile's `health`: /health answers 200 while the process serves, lameduck included. */
  health?: HostPort | undefined;
  log: Logger;
}

export interface Launched extends Serving {
  start(): Promise<ForwarderStarted & { healthPort: number | undefined }>;
}

/**
 * The one place that decides how the forwarder runs, for every entry point (the kube-dns flags,
 * Corefile mode, node-local mode): one forwarder in this thread, or a pool of workers sharing one
 * cache (worker-pool.ts); and the Corefile's /health beside it, on a server core of its own, so the
 * forwarder's lameduck and drain happen while /health still answers, as CoreDNS's health does.
 */
export function launchForwarder(spec: LaunchSpec): Launched {
  const { options, log } = spec;
  checkWorkers(spec.workersFlag, spec.workers);
  const forwarder: Serving =
    spec.workers > 1
      ? createWorkerPool({
          options,
          program: spec.program,
          count: spec.workers,
          metrics: { address: options.metricsAddress, port: options.metricsPort, flags: spec.metricsFlags },
          reusePort: options.reusePort,
          leader: forwarderLeader(options, spec.config),
          log,
        })
      : createForwarder(options, {
          log,
          ...(spec.config ? { config: spec.config } : {}),
          ...(spec.sharedStoreAlone ? { sharedCache: sharedStoreFor(options) } : {}),
        });
  const server = new ServerCore({ log, lameduckMs: 0, lameduck: 'always' });
  return {
    async start() {
      let healthPort: number | undefined;
      // First: a failed bind leaves nothing to undo, and CoreDNS's /health answers from the start too.
      if (spec.health) {
        const health = await server.listenHttp(
          'health',
          spec.health.host,
          spec.health.port,
          { '/health': () => ({ status: 200, body: 'OK' }) },
          { flags: 'the Corefile’s health', reusePort: options.reusePort },
        );
        healthPort = health.port;
      }
      try {
        return { ...(await forwarder.start()), healthPort };
      } catch (error) {
        // The forwarder closed what it had bound; the health listener goes too.
        await server.shutdown();
        throw error;
      }
    },
    async shutdown() {
      await forwarder.shutdown();
      await server.shutdown();
    },
  };
}
