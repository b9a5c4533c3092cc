#!/usr/bin/env node
import { readFile } from 'node:fs/promises';
import { FlagError, nodeProcessHooks, originText, runMain, validateCorefileAt } from '@cluster-dns/runtime';
import { recordBuilderFromCorefile } from './corefile-options.js';
import { prometheusPortArgs, recordBuilderFlags, toRecordBuilderOptions, withCorefile } from './options.js';
import { createRecordBuilder } from './record-builder.js';

const hooks = nodeProcessHooks();
// kube-dns's PROMETHEUS_PORT, as kube-dns.yaml sets it: the metrics port, unless a flag says otherwise.
const fromEnv = prometheusPortArgs(process.env.PROMETHEUS_PORT);
if ('error' in fromEnv) {
  hooks.stderr(`record-builder: ${fromEnv.error}\n`);
  hooks.exit(2);
}
await runMain(
  {
    program: 'record-builder',
    summary:
      'The kubedns container of cluster-dns: watches Services and EndpointSlices and answers the cluster zone and reverse zones authoritatively.',
    flags: recordBuilderFlags,
    shutdownDeadlineMs: 60_000,
    command: (values, io) => {
      if (!values.validate) return undefined;
      if (!values.corefile) throw new FlagError('--validate', 'true', 'given with --corefile=PATH');
      return validateCorefileAt(values.corefile, 'pod', { ...io, env: process.env });
    },
    start: async (values, { log }) => {
      const flagged = toRecordBuilderOptions(values);
      const options = values.corefile
        ? withCorefile(
            flagged,
            recordBuilderFromCorefile(await readFile(values.corefile, 'utf8'), values.corefile, {
              env: process.env,
              onWarning: (w) => log.warn('Corefile', { at: originText(w), warning: w.message }),
            }),
          )
        : flagged;
      log.info('starting', { options, ...(values.corefile ? { corefile: values.corefile } : {}) });
      const kube = {
        kubecfgFile: options.kubecfgFile,
        masterUrl: options.masterUrl,
        envKubeconfig: process.env.KUBECONFIG,
        inCluster: process.env.KUBERNETES_SERVICE_HOST !== undefined,
        ...(options.kubeContext ? { context: options.kubeContext } : {}),
      };
      const builder = createRecordBuilder(options, { log, kube });
      await builder.start();
      return { shutdown: () => builder.shutdown() };
    },
  },
  { ...hooks, argv: ['args' in fromEnv ? fromEnv.args : [], hooks.argv].flat() },
);
