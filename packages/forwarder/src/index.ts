// What other packages' tests may need of the forwarder: its flag table.

export { nodeCacheFlags } from './node-cache-options.js';
export { planNodeLocal } from './node-local-plan.js';
export { forwarderFlags, toForwarderOptions } from './options.js';
