#!/usr/bin/env node
import { FlagError, nodeProcessHooks, runMain, validateCorefileAt } from '@cluster-dns/runtime';
import { forwarderFlags, toForwarderOptions } from './options.js';
import { corefileForwarder } from './server/corefile-setup.js';
import { launchForwarder } from './workers/launcher.js';

const hooks = nodeProcessHooks();
await runMain(
  {
    program: 'forwarder',
    summary:
      'The dnsmasq container of cluster-dns: a caching DNS forwarder that sends the cluster zone to the record-builder, stub domains to their servers and the rest upstream. Takes dnsmasq flags, or a CoreDNS Corefile (--corefile).',
    flags: forwarderFlags,
    shutdownDeadlineMs: 30_000,
    command: (values, io) => {
      if (!values.validate) return undefined;
      if (!values.corefile) throw new FlagError('--validate', 'true', 'given with --corefile=PATH');
      return validateCorefileAt(values.corefile, 'pod', { ...io, env: process.env });
    },
    start: async (values, { log }) => {
      const common = { program: 'forwarder', workers: values.workers, workersFlag: '--workers', log };
      let forwarder: ReturnType<typeof launchForwarder>;
      if (values.corefile) {
        const { plan, options, config } = await corefileForwarder(values, { log, env: process.env });
        log.info('starting in Corefile mode', { corefile: values.corefile, options, workers: values.workers });
        forwarder = launchForwarder({
          ...common,
          options,
          config,
          metricsFlags: 'the Corefile’s prometheus',
          health: plan.health,
        });
      } else {
        const options = toForwarderOptions(values);
        log.info('starting', { options, workers: values.workers });
        forwarder = launchForwarder({ ...common, options, metricsFlags: '--metrics-address, --metrics-port' });
      }
      await forwarder.start();
      return { shutdown: () => forwarder.shutdown() };
    },
  },
  hooks,
);
