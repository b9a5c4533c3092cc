import type { Registry } from 'prom-client';
import { HistogramStore, registerHistogram } from './query-stats.js';

/**
 * CoreDNS's name for the DNS programming latency SLI, exported by every layer that answers: the
 * record-builder when a change is in its answers, each forwarder and node cache when it has
 * dropped what the change made stale. CoreDNS's buckets: 1 ms doubling to ~9 minutes.
 */
export const PROGRAMMING_DURATION_NAME = 'coredns_kubernetes_dns_programming_duration_seconds';
export const PROGRAMMING_DURATION_HELP =
  'Histogram of the time (in seconds) it took to program a dns instance: from an EndpointSlice’s last-change-trigger-time to this instance answering with the change, by service_kind.';
export const PROGRAMMING_DURATION_BUCKETS: readonly number[] = Array.from({ length: 20 }, (_, k) => 0.001 * 2 ** k);

/** The SLI's histogram, keyed by service_kind. */
export class ProgrammingLatency {
  readonly store = new HistogramStore(PROGRAMMING_DURATION_BUCKETS);

  /** A change of this kind triggered at `triggerMs` is answered now (`nowMs`, this instance's clock). */
  observe(kind: string, triggerMs: number, nowMs: number): void {
    this.store.observe(kind, () => ({ service_kind: kind }), Math.max(0, nowMs - triggerMs) / 1000);
  }
}

/** Shows the histogram on a registry under CoreDNS's name. */
export function registerProgrammingLatency(registry: Registry, latency: ProgrammingLatency): void {
  registerHistogram(registry, PROGRAMMING_DURATION_NAME, PROGRAMMING_DURATION_HELP, latency.store);
}
