// What other packages' tests may need of the forwarder: its flag tables and metrics (the generated
// reference).

export { nodeCacheFlags } from './node-local/node-cache-options.js';
export { planNodeLocal } from './node-local/node-local-plan.js';
export { forwarderFlags, toForwarderOptions } from './options.js';
export { UpstreamStats } from './plugins/forward/upstream-stats.js';
export { createForwarderMetrics } from './server/metrics.js';
export { NamespaceTally, namespaceQueriesMetric } from './server/namespace-tally.js';
export { ServerQueryCounts } from './server/query-counts.js';
export { WORKERS_WITHOUT_QUOTA } from './workers/cpu-budget.js';
