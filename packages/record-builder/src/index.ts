// What other packages' tests may need of the record-builder: its flag table and what it watches.
export { recordBuilderFlags, toRecordBuilderOptions } from './options.js';
export { watchedResources } from './watched-resources.js';
