#!/usr/bin/env node
import { nodeProcessHooks, runMain } from '@cluster-dns/runtime';
import { recordBuilderFlags, toRecordBuilderOptions } from './options.js';
import { createRecordBuilder } from './record-builder.js';

await runMain(
  {
    program: 'record-builder',
    summary:
      'The kubedns container of cluster-dns: watches Services and EndpointSlices and answers the cluster zone and reverse zones authoritatively.',
    flags: recordBuilderFlags,
    shutdownDeadlineMs: 60_000,
    start: async (values, { log }) => {
      const options = toRecordBuilderOptions(values);
      log.info('starting', { options });
      const kube = {
        kubecfgFile: options.kubecfgFile,
        masterUrl: options.masterUrl,
        envKubeconfig: process.env.KUBECONFIG,
        inCluster: process.env.KUBERNETES_SERVICE_HOST !== undefined,
      };
      const builder = createRecordBuilder(options, { log, kube });
      await builder.start();
      return { shutdown: () => builder.shutdown() };
    },
  },
  nodeProcessHooks(),
);
