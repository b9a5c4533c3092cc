// Case 13 of pnpm bench: the record-builder's start at 5,000-node object counts (10,000 Services,
// 100,000 endpoints, 5,000 node-cache pods), listed by streaming (WatchList, one watch per
// resource that brings the state) and by paged lists (an API server before WatchList), the two
// interleaved. What the API sends, how many requests, and the record-builder's peak RSS to ready.
import { readFileSync } from 'node:fs';
import { fixtures } from '@cluster-dns/testkit';
import { round, rssTreeMiB, SERVER_CORE } from './lib.mjs';
import { clusterObjects, startRecordBuilder } from './scale.mjs';

const NODES = 5000;

/** The node-local DaemonSet's pods, one per node (hostNetwork, at the node's address). */
function nodeCachePods() {
  return Array.from({ length: NODES }, (_, i) => {
    const hostIP = `10.240.${i >> 8}.${i & 255}`;
    return fixtures.pod('kube-system', `node-local-dns-${i}`, [hostIP], {
      hostIP,
      hostNetwork: true,
      labels: { 'k8s-app': 'node-local-dns' },
    });
  });
}

/** The process's peak RSS (VmHWM): its highest, whenever it came. */
const peakRssMiB = (pid) =>
  round(Number(/^VmHWM:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]) / 1024, 1);

export async function runListing({ row, notes, rounds = 2 }) {
  const objects = [...clusterObjects(), ...nodeCachePods()];
  for (let r = 1; r <= rounds; r++)
    for (const streaming of [true, false]) {
      // --pods=verified: every Pod is listed and watched too (the node caches' among them).
      const { api, rb, cpuToReadyS } = await startRecordBuilder(objects, String(SERVER_CORE), undefined, {
        api: { watchList: streaming },
        args: ['--pods=verified'],
      });
      try {
        row(
          `13. start at ${NODES.toLocaleString('en')} nodes: ${streaming ? 'streamed lists (WatchList)' : 'paged lists'}`,
          'cluster-dns',
          {
            round: r,
            readyS: round(rb.readyMs / 1000, 2),
            cpuToReadyS: round(cpuToReadyS, 2),
            apiMiBSent: round(api.bytesSent() / 1048576, 1),
            requests: api.requests.length,
            lists: api.requests.filter((q) => !q.watch).length,
            watches: api.openWatches(),
            endpoints: rb.ready.endpoints,
            peakRssMiB: peakRssMiB(rb.pid),
            rssMiBAtReady: rssTreeMiB(rb.pid),
          },
        );
      } finally {
        await rb.stop();
        await api.close();
      }
    }
  notes.push(
    `Case 13 starts the record-builder (its bundle, on one core, --pods=verified) against testkit's API server with 10,000 Services, 100,000 endpoints and ${NODES.toLocaleString('en')} node-cache pods, streamed and paged in turn, ${rounds} rounds; the API's bytes are every octet it wrote until ready, headers and chunking included.`,
  );
}
