import { parseFlags } from '@cluster-dns/runtime';
import { corefileForwarder } from './corefile-mode/corefile-forwarder.js';
import { forwarderFlags, toForwarderOptions } from './options.js';
import { serveAsWorker } from './workers/worker-main.js';

// One worker of the forwarder's --workers (the Pod's, or Corefile mode's): its flags parsed again.
await serveAsWorker(async (data, logAt) => {
  const values = parseFlags(forwarderFlags, data.argv).values;
  const log = logAt(values.v);
  if (!values.corefile) return { options: toForwarderOptions(values) };
  const setup = await corefileForwarder(values, { log });
  return { options: setup.options, config: setup.config };
});
