#!/usr/bin/env node
/**
 * Serves a folder of YAML manifests as a Kubernetes API server and writes a kubeconfig for it.
 *   node packages/testkit/dist/cli.js --manifests manifests/demo --kubeconfig /tmp/demo.kubeconfig [--port 0]
 */
import { flag, nodeProcessHooks, runMain } from '@cluster-dns/runtime';
import { startApiServer } from './api-server.js';
import { loadManifestFolder } from './manifests.js';

const flags = {
  manifests: flag.string('folder of YAML manifests to serve', 'manifests/demo'),
  kubeconfig: flag.string('where to write a kubeconfig that points at this server', ''),
  host: flag.string('address to listen on', '127.0.0.1'),
  port: flag.int('port to listen on; 0 picks a free one', 0, { min: 0, max: 65535 }),
};

await runMain(
  {
    program: 'testkit-api',
    summary: 'A Kubernetes API server (list/watch REST) serving a folder of manifests, for tests and the demo.',
    flags,
    start: async (values, { log }) => {
      const api = await startApiServer({
        host: values.host,
        port: values.port,
        objects: await loadManifestFolder(values.manifests),
      });
      if (values.kubeconfig) await api.writeKubeconfig(values.kubeconfig);
      log.info('ready', {
        url: api.url,
        port: api.port,
        kubeconfig: values.kubeconfig || undefined,
        objects: api.store.resourceVersion - 1,
      });
      return { shutdown: () => api.close() };
    },
  },
  nodeProcessHooks(),
);
