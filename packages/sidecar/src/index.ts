// What other packages' tests may need of the sidecar: its flag table and metrics (the generated reference).

export { createSidecarMetrics } from './metrics.js';
export { sidecarFlags } from './options.js';
export { parseProbeFlag } from './probe-flag.js';
