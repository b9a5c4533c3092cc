import { HistogramStore, LabelledCounts } from '@cluster-dns/runtime';
import { type MetricObjectWithValues, type MetricValue, Registry } from 'prom-client';
import { noDoorCounts } from '../isolation/client-door.js';
import { createListenerMetrics } from '../server/metrics.js';
import type { LaneCounts } from './lane.js';

type MetricsJson = Array<MetricObjectWithValues<MetricValue<string>>>;

/**
 * A lane's counts (what it sends when asked) shown through the same series a forwarder's listeners
 * have (createListenerMetrics), in the main thread: the lane itself loads no metrics library.
 */
export function laneMetrics(worker: number, server: () => string): { json(counts: LaneCounts): Promise<MetricsJson> } {
  let last: LaneCounts | undefined;
  const requests = new LabelledCounts();
  const responses = new LabelledCounts();
  const duration = new HistogramStore();
  const registry = new Registry();
  const zeroDoor = noDoorCounts();
  const noTcp = { open: 0, refused: { limit: 0, perClient: 0 }, stalls: { timeout: 0, budget: 0 }, unsentBytes: 0 };
  createListenerMetrics(registry, {
    worker: String(worker),
    server,
    hits: () => last ?? { hits: 0, denialHits: 0 },
    door: {
      get counts() {
        return last?.door ?? zeroDoor;
      },
      trackedClients: () => last?.trackedClients ?? 0,
    },
    shed: () => last?.shed ?? 0,
    queries: { requests, responses, duration },
    tcp: () => last?.tcp ?? noTcp,
  });
  return {
    json(counts) {
      last = counts;
      requests.restore(counts.requests);
      responses.restore(counts.responses);
      duration.restore(counts.duration);
      return registry.getMetricsAsJSON() as Promise<MetricsJson>;
    },
  };
}
