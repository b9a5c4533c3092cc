// What other packages' tests may need of the forwarder: its flag tables and metrics (the generated
// reference).

export { createForwarderMetrics } from './metrics.js';
export { NamespaceTally, namespaceQueriesMetric } from './namespace-tally.js';
export { nodeCacheFlags } from './node-local/node-cache-options.js';
export { planNodeLocal } from './node-local/node-local-plan.js';
export { forwarderFlags, toForwarderOptions } from './options.js';
export { ServerQueryCounts } from './query-counts.js';
export { UpstreamStats } from './upstream-stats.js';
export { WORKERS_WITHOUT_QUOTA } from './workers/cpu-budget.js';
