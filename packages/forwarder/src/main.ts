#!/usr/bin/env node
import { nodeProcessHooks, runMain } from '@cluster-dns/runtime';
import { startCorefileForwarder } from './corefile-mode/corefile-forwarder.js';
import { createForwarder } from './forwarder.js';
import { forwarderFlags, toForwarderOptions } from './options.js';
import { checkWorkers, createWorkerPool, forwarderLeader } from './workers/worker-pool.js';

const hooks = nodeProcessHooks();
await runMain(
  {
    program: 'forwarder',
    summary:
      'The dnsmasq container of cluster-dns: a caching DNS forwarder that sends the cluster zone to the record-builder, stub domains to their servers and the rest upstream. Takes dnsmasq flags.',
    flags: forwarderFlags,
    shutdownDeadlineMs: 30_000,
    start: async (values, { log }) => {
      if (values.corefile) return startCorefileForwarder(values, { log });
      const options = toForwarderOptions(values);
      checkWorkers('--workers', values.workers);
      log.info('starting', { options, workers: values.workers });
      const forwarder =
        values.workers > 1
          ? createWorkerPool({
              options,
              program: 'forwarder',
              count: values.workers,
              metrics: {
                address: options.metricsAddress,
                port: options.metricsPort,
                flags: '--metrics-address, --metrics-port',
              },
              reusePort: false,
              leader: forwarderLeader(options),
              log,
            })
          : createForwarder(options, { log });
      await forwarder.start();
      return { shutdown: () => forwarder.shutdown() };
    },
  },
  hooks,
);
