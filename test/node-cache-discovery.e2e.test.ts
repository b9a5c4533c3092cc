import dgram from 'node:dgram';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  fixtures,
  freePort,
  type LaunchedProcess,
  launchProcess,
  localRecordBuilderArgs,
  startApiServer,
  waitFor,
} from '@cluster-dns/testkit';
import { decodeMessage, OPCODE } from '@cluster-dns/wire';
import { afterEach, describe, expect, it } from 'vitest';
import { dist } from './support/stack.js';

// Two record-builder replicas find the node caches in the API (the node-local DaemonSet's pods,
// by label) and share them out: each node cache is pushed to by one replica, and when a replica
// stops being ready its nodes go to the other. The node caches are NOTIFY receivers on loopback
// addresses, one per "node", standing in for each node's hostNetwork cache.
const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const NODES = Array.from({ length: 12 }, (_, i) => `127.0.0.${11 + i}`);
const REPLICAS = ['10.244.0.5', '10.244.0.6'];

const nodeLocalPod = (i: number, hostIP: string) =>
  fixtures.pod('kube-system', `node-local-dns-${i}`, [], {
    labels: { 'k8s-app': 'node-local-dns' },
    hostIP,
    hostNetwork: true,
  });
const kubeDnsSlice = (ready: Record<string, boolean>) =>
  fixtures.endpointSlice(
    'kube-system',
    'kube-dns',
    'kube-dns-abcde',
    REPLICAS.map((ip) => ({ addresses: [ip], ready: ready[ip] ?? true })),
    { ports: [{ name: 'dns', port: 53, protocol: 'UDP' }] },
  );

/** A node cache's NOTIFY port: acknowledges every NOTIFY and counts them by zone. */
async function receiver(host: string, port: number) {
  const socket = dgram.createSocket('udp4');
  const notified = new Map<string, number>();
  socket.on('message', (message, from) => {
    const decoded = decodeMessage(message);
    if (decoded.flags.opcode !== OPCODE.NOTIFY) return;
    const zone = decoded.questions[0]?.name ?? '';
    notified.set(zone, (notified.get(zone) ?? 0) + 1);
    const reply = Buffer.from(message);
    reply.writeUInt16BE(reply.readUInt16BE(2) | 0x8400, 2);
    socket.send(reply, from.port, from.address);
  });
  await new Promise<void>((resolve) => socket.bind(port, host, () => resolve()));
  cleanups.push(async () => socket.close());
  return { host, count: (zone = 'cluster.local.') => notified.get(zone) ?? 0 };
}

async function replica(kubeconfig: string, podIp: string, port: number): Promise<LaunchedProcess> {
  const rb = await launchProcess({
    script: dist('record-builder'),
    args: localRecordBuilderArgs(kubeconfig, [
      '--node-cache-selector=k8s-app=node-local-dns',
      `--node-cache-port=${port}`,
      `--pod-ip=${podIp}`,
    ]),
  });
  cleanups.push(() => rb.stop('SIGKILL'));
  return rb;
}

const gauge = async (rb: LaunchedProcess, series: string) => {
  const text = await (await fetch(`http://127.0.0.1:${rb.ready.metricsPort}/metrics`)).text();
  return Number(new RegExp(`^${series.replace(/[{}]/g, '\\$&')} (\\S+)`, 'm').exec(text)?.[1] ?? Number.NaN);
};
const owned = (rb: LaunchedProcess) => gauge(rb, 'clusterdns_recordbuilder_node_caches{which="owned"}');
const known = (rb: LaunchedProcess) => gauge(rb, 'clusterdns_recordbuilder_node_caches{which="known"}');
const sent = (rb: LaunchedProcess) =>
  gauge(rb, 'clusterdns_recordbuilder_notifies_sent_total{target="node-caches",zone="cluster.local."}');

describe('record-builder: node caches found in the API, shared out between replicas', () => {
  it('pushes each node cache from one replica, moves a replica’s nodes when it is not ready, and drops a node whose pod is gone', async () => {
    const api = await startApiServer({
      objects: [
        fixtures.service('kube-system', 'kube-dns', {
          clusterIPs: ['10.96.0.10'],
          ports: [{ name: 'dns', port: 53, protocol: 'UDP' }],
        }),
        kubeDnsSlice({}),
        ...NODES.map((ip, i) => nodeLocalPod(i, ip)),
        // Another DaemonSet's pod in the namespace: not a node cache.
        fixtures.pod('kube-system', 'kube-proxy-0', [], { labels: { 'k8s-app': 'kube-proxy' }, hostIP: '127.0.0.99' }),
      ],
    });
    cleanups.push(() => api.close());
    const kubeconfig = join(await mkdtemp(join(tmpdir(), 'discovery-')), 'kubeconfig');
    await api.writeKubeconfig(kubeconfig);
    const port = await freePort();
    const caches = await Promise.all(NODES.map((ip) => receiver(ip, port)));
    const a = await replica(kubeconfig, REPLICAS[0] as string, port);
    const b = await replica(kubeconfig, REPLICAS[1] as string, port);

    // Every node cache hears from the replicas once they are ready (entering push mode)…
    await waitFor(() => caches.every((c) => c.count() > 0), {
      what: 'a NOTIFY at every node cache',
      seen: () => caches.map((c) => `${c.host}:${c.count()}`).join(' '),
    });
    // …each from exactly one: the two shares partition the nodes.
    await waitFor(async () => (await known(a)) === 12 && (await known(b)) === 12, {
      what: 'both replicas knowing 12 node caches',
    });
    const [ownA, ownB] = [await owned(a), await owned(b)];
    expect(ownA + ownB).toBe(12);
    expect(ownA).toBeGreaterThan(0);
    expect(ownB).toBeGreaterThan(0);
    expect(await gauge(a, 'clusterdns_recordbuilder_node_cache_replicas')).toBe(2);

    // Replica b's endpoint turns not ready (a rolling update, a failed probe): a takes every node,
    // and b sends nothing more, even on a change.
    api.apply(kubeDnsSlice({ [REPLICAS[1] as string]: false }));
    await waitFor(async () => (await owned(a)) === 12 && (await owned(b)) === 0, {
      what: 'replica a owning all 12 node caches',
    });
    const before = caches.map((c) => c.count());
    const sentByB = await sent(b);
    api.apply(fixtures.service('shop', 'web', { clusterIPs: ['10.96.1.10'], ports: [{ name: 'http', port: 80 }] }));
    await waitFor(() => caches.every((c, i) => c.count() > (before[i] as number)), {
      what: 'the change NOTIFYed to every node cache by replica a',
      seen: () => caches.map((c, i) => `${c.host}:${before[i] as number}→${c.count()}`).join(' '),
    });
    expect(await sent(b)).toBe(sentByB);

    // A node cache's pod deleted (the node drained): it is dropped; the others still hear of changes.
    api.remove('Pod', 'kube-system', 'node-local-dns-0');
    await waitFor(async () => (await known(a)) === 11 && (await owned(a)) === 11, {
      what: 'node-local-dns-0 forgotten',
    });
    const after = caches.map((c) => c.count());
    api.apply(fixtures.service('shop', 'pay', { clusterIPs: ['10.96.1.11'], ports: [{ name: 'http', port: 80 }] }));
    await waitFor(() => caches.slice(1).every((c, i) => c.count() > (after[i + 1] as number)), {
      what: 'the next change at the 11 node caches left',
    });
    expect(caches[0]?.count()).toBe(after[0]);
  });
});
