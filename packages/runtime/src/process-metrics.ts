import { collectDefaultMetrics, type Registry } from 'prom-client';

/**
 * prom-client's gauges that end in `_total`, which promtool (and Prometheus's naming rules)
 * reserve for counters; the same counts stay available as `nodejs_active_*` without the suffix
 * nowhere else, so they are dropped rather than kept under a name linters reject.
 */
const MISNAMED_DEFAULTS = [
  'nodejs_active_handles_total',
  'nodejs_active_requests_total',
  'nodejs_active_resources_total',
];

/** The process_* and nodejs_* metrics every process exports, on its own registry. */
export function collectProcessMetrics(registry: Registry): void {
  collectDefaultMetrics({ register: registry });
  for (const name of MISNAMED_DEFAULTS) registry.removeSingleMetric(name);
}
