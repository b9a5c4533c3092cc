import { collectProcessMetrics } from '@cluster-dns/runtime';
import { Counter, Histogram, type Registry } from 'prom-client';
import type { ProbeSpec } from './probe-flag.js';

/** kube-dns's probe buckets: 0.25 ms × 2^k for k = 0…15 (0.25 ms to 8192 ms). */
export const PROBE_BUCKETS_MS = Array.from({ length: 16 }, (_, k) => 0.25 * 2 ** k);

export const DNSMASQ_STATS = ['hits', 'misses', 'evictions', 'insertions', 'cachesize'] as const;
export type DnsmasqStat = (typeof DNSMASQ_STATS)[number];

/** Every metric of the sidecar, with kube-dns's names under `namespace`, on the given registry. */
export function createSidecarMetrics(registry: Registry, namespace: string, probes: readonly ProbeSpec[]) {
  collectProcessMetrics(registry);
  const dnsmasqName: Record<DnsmasqStat, string> = {
    hits: 'hits',
    misses: 'misses',
    evictions: 'evictions',
    insertions: 'insertions',
    cachesize: 'max_size',
  };
  const dnsmasq = Object.fromEntries(
    DNSMASQ_STATS.map((stat) => [
      stat,
      new Counter({
        name: `${namespace}_dnsmasq_${dnsmasqName[stat]}`,
        help: `dnsmasq ${stat}.bind, as a counter that stays monotonic across forwarder restarts.`,
        registers: [registry],
      }),
    ]),
  ) as Record<DnsmasqStat, Counter>;
  const dnsmasqErrors = new Counter({
    name: `${namespace}_dnsmasq_errors`,
    help: 'Failed polls of the forwarder statistics (a round with any failed query).',
    registers: [registry],
  });
  const probeLatency = new Map<string, Histogram>();
  const probeErrors = new Map<string, Counter>();
  // kube-dns names a counter per probe; one counter labelled by probe is what an alert can rate()
  // over all probes (rate() drops the metric name, and two probes' series would then collide).
  const failures = new Counter({
    name: 'clusterdns_sidecar_probe_errors_total',
    help: 'Failed DNS probes, by probe label (the sum of the kube-dns per-probe counters).',
    labelNames: ['probe'],
    registers: [registry],
  });
  for (const p of probes) {
    probeLatency.set(
      p.label,
      new Histogram({
        name: `${namespace}_probe_${p.label}_latency_ms`,
        help: `Latency of successful DNS probes of ${p.label}, in milliseconds.`,
        buckets: PROBE_BUCKETS_MS,
        registers: [registry],
      }),
    );
    probeErrors.set(
      p.label,
      new Counter({
        name: `${namespace}_probe_${p.label}_errors`,
        help: `Failed DNS probes of ${p.label}.`,
        registers: [registry],
      }),
    );
  }
  return {
    dnsmasqGrowth(stat: DnsmasqStat, delta: number): void {
      dnsmasq[stat].inc(delta);
    },
    dnsmasqError(): void {
      dnsmasqErrors.inc();
    },
    probeSucceeded(label: string, latencyMs: number): void {
      probeLatency.get(label)?.observe(latencyMs);
    },
    probeFailed(label: string): void {
      probeErrors.get(label)?.inc();
      failures.labels(label).inc();
    },
  };
}

export type SidecarMetrics = ReturnType<typeof createSidecarMetrics>;
