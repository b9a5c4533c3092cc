import { parseFlags } from '@cluster-dns/runtime';
import { nodeCacheFlags } from './node-local/node-cache-options.js';
import { nodeCacheForwarder } from './node-local/setup.js';
import { serveAsWorker } from './workers/worker-main.js';

// One worker of node-local mode's -workers: node-cache's flags parsed again, the forwarder built
// by node-local's setup. Only the first worker writes the filled-in Corefile when it changes.
await serveAsWorker(async (data, logAt) => {
  const values = parseFlags(nodeCacheFlags, data.argv).values;
  const setup = await nodeCacheForwarder(values, {
    log: logAt(values.v),
    env: process.env,
    writeRendered: data.index === 0,
  });
  return { options: setup.options, config: setup.config };
});
