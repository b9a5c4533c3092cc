/**
 * The lane's entry (lane-worker.ts), found from this file: it sits in the same folder as the entry
 * points, both in dist/ and in the image's bundle, where this module is inlined into main.js and
 * node-cache-main.js. A URL made in workers/ would point one folder up from the bundle.
 */
export const LANE_SCRIPT = new URL('./lane-worker.js', import.meta.url);
