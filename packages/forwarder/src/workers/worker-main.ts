import { parentPort, workerData } from 'node:worker_threads';
import { createLogger, describeError, type Logger, levelFromVerbosity } from '@cluster-dns/runtime';
import { monotonicMs } from '../cache.js';
import { createForwarder, type ForwarderDeps } from '../forwarder.js';
import type { ForwarderOptions } from '../options.js';
import { SharedAnswerStore } from '../shared-cache/shared-answer-store.js';
import { broadcastLink, createWorkerPeers } from './worker-peers.js';
import type { ToWorker, WorkerData } from './worker-pool.js';

/** What a worker's entry builds from the process's flags: the forwarder's options and config. */
export interface WorkerBuild {
  options: ForwarderOptions;
  config?: ForwarderDeps['config'];
}

/**
 * The life of one worker thread of --workers (worker-pool.ts), whichever entry started it: the
 * entry parses the process's flags again and builds the options (`build`, given the worker's
 * data and a logger at the verbosity the flags say); here a whole forwarder is started on the
 * pool's port with SO_REUSEPORT beside the others, its zone sync and statistics shared over the
 * pool's channel, and it answers the pool's messages until told to stop.
 */
export async function serveAsWorker(
  build: (data: WorkerData, logAt: (verbosity: number) => Logger) => Promise<WorkerBuild>,
): Promise<void> {
  const port = parentPort;
  if (!port) throw new Error('a forwarder worker runs as a worker thread of the forwarder');
  const data = workerData as WorkerData;
  let log = createLogger({ component: data.program }).child({ worker: data.index });
  try {
    const logAt = (verbosity: number) => {
      log = createLogger({ component: data.program, level: levelFromVerbosity(verbosity) }).child({
        worker: data.index,
      });
      return log;
    };
    const built = await build(data, logAt);
    const options: ForwarderOptions = {
      ...built.options,
      port: data.port,
      reusePort: true,
      ...(built.options.notifyListen && data.notifyPort !== undefined
        ? { notifyListen: { ...built.options.notifyListen, port: data.notifyPort } }
        : {}),
    };
    const peers = createWorkerPeers({
      link: broadcastLink(data.channel),
      index: data.index,
      count: data.count,
      timeoutMs: 1_000,
      log,
    });
    const sharedCache = new SharedAnswerStore(data.cacheMemory, monotonicMs, options.maxStaleSeconds);
    const forwarder = createForwarder(options, {
      log,
      peers,
      sharedCache,
      ...(built.config ? { config: built.config } : {}),
    });
    const started = await forwarder.start();
    port.on('message', (message: ToWorker) => {
      if (message.t === 'metrics') {
        void forwarder.metricsJson().then((json) => port.postMessage({ t: 'metrics', id: message.id, json }));
      } else if (message.t === 'stop') {
        void forwarder.shutdown().then(() => {
          peers.close();
          port.postMessage({ t: 'stopped' });
          port.close();
        });
      }
    });
    port.postMessage({ t: 'ready', port: started.port, notifyPort: started.notifyPort });
  } catch (error) {
    port.postMessage({ t: 'failed', error: describeError(error) });
    port.close();
  }
}
