import { parentPort, workerData } from 'node:worker_threads';
import { createLogger, describeError, levelFromVerbosity, parseFlags } from '@cluster-dns/runtime';
import { corefileForwarder } from './corefile-mode/corefile-forwarder.js';
import { createForwarder, type ForwarderDeps } from './forwarder.js';
import { nodeCacheForwarder } from './node-local/node-cache.js';
import { nodeCacheFlags } from './node-local/node-cache-options.js';
import { type ForwarderOptions, forwarderFlags, toForwarderOptions } from './options.js';
import { broadcastLink, createWorkerPeers } from './workers/worker-peers.js';
import type { ToWorker, WorkerData } from './workers/worker-pool.js';

// One worker of --workers (worker-pool.ts): a whole forwarder on the pool's port, bound with
// SO_REUSEPORT beside the others. Its flags are the process's, parsed again here.
const port = parentPort;
if (!port) throw new Error('forwarder-worker.js runs as a worker thread of the forwarder');
const data = workerData as WorkerData;
let log = createLogger({ component: data.program }).child({ worker: data.index });
try {
  let options: ForwarderOptions;
  let config: ForwarderDeps['config'];
  if (data.kind === 'node-cache') {
    const values = parseFlags(nodeCacheFlags, data.argv).values;
    log = createLogger({ component: data.program, level: levelFromVerbosity(values.v) }).child({ worker: data.index });
    // Only the first worker writes the filled-in Corefile when it changes.
    const setup = await nodeCacheForwarder(values, {
      log,
      env: process.env,
      writeRendered: data.index === 0,
    });
    options = setup.options;
    config = setup.config;
  } else {
    const values = parseFlags(forwarderFlags, data.argv).values;
    log = createLogger({ component: data.program, level: levelFromVerbosity(values.v) }).child({ worker: data.index });
    if (values.corefile) {
      const setup = await corefileForwarder(values, { log });
      options = setup.options;
      config = setup.config;
    } else options = toForwarderOptions(values);
  }
  options = {
    ...options,
    port: data.port,
    reusePort: true,
    ...(options.notifyListen && data.notifyPort !== undefined
      ? { notifyListen: { ...options.notifyListen, port: data.notifyPort } }
      : {}),
  };
  const peers = createWorkerPeers({
    link: broadcastLink(data.channel),
    index: data.index,
    count: data.count,
    timeoutMs: 1_000,
    log,
  });
  const forwarder = createForwarder(options, { log, peers, ...(config ? { config } : {}) });
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
