#!/usr/bin/env node
import { nodeProcessHooks, runMain } from '@cluster-dns/runtime';
import { sidecarFlags, toSidecarOptions } from './options.js';
import { createSidecar } from './sidecar.js';

await runMain(
  {
    program: 'sidecar',
    summary:
      'The sidecar container of cluster-dns: DNS probes of the record-builder and forwarder, /healthcheck/<label>, /healthz and Prometheus metrics.',
    flags: sidecarFlags,
    shutdownDeadlineMs: 10_000,
    start: async (values, { log }) => {
      const options = toSidecarOptions(values);
      log.info('starting', { options });
      const sidecar = createSidecar(options, { log });
      await sidecar.start();
      return { shutdown: () => sidecar.shutdown() };
    },
  },
  nodeProcessHooks(),
);
