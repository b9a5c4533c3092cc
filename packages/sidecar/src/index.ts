// What other packages' tests may need of the sidecar: its flag table.
export { sidecarFlags } from './options.js';
