#!/usr/bin/env node
import { nodeProcessHooks, runMain } from '@cluster-dns/runtime';
import { createForwarder } from './forwarder.js';
import { forwarderFlags, toForwarderOptions } from './options.js';

await runMain(
  {
    program: 'forwarder',
    summary:
      'The dnsmasq container of cluster-dns: a caching DNS forwarder that sends the cluster zone to the record-builder, stub domains to their servers and the rest upstream. Takes dnsmasq flags.',
    flags: forwarderFlags,
    shutdownDeadlineMs: 30_000,
    start: async (values, { log }) => {
      const options = toForwarderOptions(values);
      log.info('starting', { options });
      const forwarder = createForwarder(options, { log });
      await forwarder.start();
      return { shutdown: () => forwarder.shutdown() };
    },
  },
  nodeProcessHooks(),
);
