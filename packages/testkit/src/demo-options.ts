import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { flag } from '@cluster-dns/runtime';

export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');

/** The README start command's flags (`pnpm demo -- --dns-port=0 …`). */
export const demoFlags = {
  kubeconfig: flag.string('run against this cluster instead of the embedded demo cluster', ''),
  manifests: flag.string('folder of YAML manifests for the demo cluster', join(repoRoot, 'manifests/demo')),
  'dns-port': flag.int('public DNS port of the forwarder; 0 picks a free one', 1053, { min: 0, max: 65535 }),
  'record-builder-port': flag.int('DNS port of the record-builder; 0 picks a free one', 10053, { min: 0, max: 65535 }),
  'healthz-port': flag.int('record-builder readiness port; 0 picks a free one', 8081, { min: 0, max: 65535 }),
  'metrics-port': flag.int('record-builder metrics port; 0 picks a free one', 10055, { min: 0, max: 65535 }),
  'sidecar-port': flag.int('sidecar HTTP port; 0 picks a free one', 10054, { min: 0, max: 65535 }),
  'forwarder-metrics-port': flag.int('forwarder metrics port; 0 picks a free one', 9153, { min: 0, max: 65535 }),
  domain: flag.string('cluster domain', 'cluster.local'),
  upstream: flag.string('upstream nameserver ip[#port] for names outside the cluster (default: /etc/resolv.conf)', ''),
  'probe-interval': flag.int('sidecar probe interval in seconds', 5, { min: 1 }),
  'poll-interval-ms': flag.int('sidecar poll interval of the forwarder statistics, in milliseconds', 5000, {
    min: 100,
  }),
  lameduck: flag.string('lameduck period of the record-builder and forwarder (Go duration)', '1s'),
};
