import { isIP } from 'node:net';
import { FlagError, type FlagValues, flag } from '@cluster-dns/runtime';
import { type ProbeSpec, parseProbeFlag } from './probe-flag.js';

/** The sidecar's flags, kube-dns sidecar compatible. Drives parsing and --help. */
export const sidecarFlags = {
  probe: flag.list(
    'a DNS probe: <label>,<server>,<name>[,<interval seconds>][,<type A|AAAA|SRV|ANY>] (repeatable)',
    parseProbeFlag,
  ),
  'dnsmasq-addr': flag.string('address of the forwarder whose CHAOS statistics are polled', '127.0.0.1', {
    check: (raw) => (isIP(raw) ? undefined : 'an IP address'),
  }),
  'dnsmasq-port': flag.int('port of the forwarder whose CHAOS statistics are polled', 53, { min: 1, max: 65535 }),
  'dnsmasq-poll-interval-ms': flag.int('how often the forwarder statistics are polled, in milliseconds', 5000, {
    min: 100,
  }),
  'prometheus-addr': flag.string('address of the HTTP server (/metrics, /healthz, /healthcheck/<label>)', '0.0.0.0', {
    check: (raw) => (isIP(raw) ? undefined : 'an IP address'),
  }),
  'prometheus-port': flag.int('port of the HTTP server; 0 picks a free one', 10054, { min: 0, max: 65535 }),
  'prometheus-path': flag.string('path of the Prometheus metrics', '/metrics', {
    check: (raw) => (raw.startsWith('/') ? undefined : 'a path starting with /'),
  }),
  'prometheus-namespace': flag.string('prefix of the metric names', 'kubedns', {
    check: (raw) => (/^[a-zA-Z_][a-zA-Z0-9_]*$/.test(raw) ? undefined : 'a Prometheus name: [a-zA-Z_][a-zA-Z0-9_]*'),
  }),
  v: flag.int('log verbosity; 4 or more logs debug lines', 0, { min: 0 }),
  logtostderr: flag.accepted('accepted for kube-dns compatibility; logs always go to stdout as JSON lines'),
};

export interface SidecarOptions {
  readonly probes: readonly ProbeSpec[];
  readonly dnsmasq: { host: string; port: number };
  readonly pollIntervalMs: number;
  readonly httpHost: string;
  readonly httpPort: number;
  readonly metricsPath: string;
  readonly namespace: string;
}

export function toSidecarOptions(values: FlagValues<typeof sidecarFlags>): SidecarOptions {
  const labels = new Set<string>();
  for (const p of values.probe) {
    if (labels.has(p.label)) throw new FlagError('--probe', p.label, 'a label used by one probe only');
    labels.add(p.label);
  }
  return Object.freeze({
    probes: Object.freeze([...values.probe]),
    dnsmasq: { host: values['dnsmasq-addr'], port: values['dnsmasq-port'] },
    pollIntervalMs: values['dnsmasq-poll-interval-ms'],
    httpHost: values['prometheus-addr'],
    httpPort: values['prometheus-port'],
    metricsPath: values['prometheus-path'],
    namespace: values['prometheus-namespace'],
  });
}
