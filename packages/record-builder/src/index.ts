// What other packages' tests may need of the record-builder: its flag table, what it watches, its
// metrics (the generated reference).

export { createRecordBuilderMetrics } from './metrics.js';
export { recordBuilderFlags, toRecordBuilderOptions } from './options.js';
export { watchedResources } from './watched-resources.js';
