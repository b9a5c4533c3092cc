/**
 * The worker threads' entries, found from this file: it sits in the same folder as the entry
 * points, both in dist/ and in the image's bundle, where this module is inlined into main.js and
 * node-cache-main.js. A URL made in workers/ would point one folder up from the bundle.
 */
export const WORKER_SCRIPTS = {
  forwarder: new URL('./forwarder-worker.js', import.meta.url),
  'node-cache': new URL('./node-cache-worker.js', import.meta.url),
} as const;
