import { serveAsLane } from './workers/lane.js';

// One lane of --workers (the Pod's forwarder, Corefile mode or node-local mode alike): everything
// it needs comes in its workerData, so it parses no flags and reads no config.
await serveAsLane();
