// What other packages' tests may need of the forwarder: its flag table.
export { forwarderFlags } from './options.js';
