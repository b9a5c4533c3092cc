import { Buffer } from 'node:buffer';
import { fileURLToPath } from 'node:url';
import {
  freePort,
  type LaunchedProcess,
  launchProcess,
  loopbackNodeCacheArgs,
  startTestUpstream,
} from '@cluster-dns/testkit';
import {
  buildQueryMessage,
  CLIENT_ADDRESS_OPTION,
  clientAddressOf,
  decodeMessage,
  encodeClientAddress,
  encodeMessage,
  encodeOptRecord,
  exchangeRaw,
  OPT_RECORD_BYTES,
  QTYPE,
  queryDns,
  RCODE,
} from '@cluster-dns/wire';
import { afterEach, describe, expect, it } from 'vitest';

// Who asked, behind a node cache: real processes on loopback, pods told apart by their source
// address in 127.0.0.0/8. The node cache (127.0.0.1) names each pod to the Pod's forwarder on its
// cluster.local block; the Pod's forwarder, trusting 127.0.0.1, counts its per-client limit
// against that pod, so one pod's flood of misses leaves its neighbour on the same node answered.
// The same run with no trust shows the neighbour refused with the flooder: the test can fail.

const root = fileURLToPath(new URL('..', import.meta.url));
const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const FLOODER = '127.0.0.3';
const NEIGHBOUR = '127.0.0.4';
const STRANGER = '127.0.0.5';

async function start(trust: boolean) {
  const cluster = await startTestUpstream({
    records: { 'web.shop.svc.cluster.local.': [{ type: QTYPE.A, address: '10.96.5.5' }] },
  });
  // The world outside the cluster, on an address of its own: it must never see a pod's address.
  const outside = await startTestUpstream({
    host: '127.0.0.2',
    records: {
      'www.example.org.': [{ type: QTYPE.A, address: '192.0.2.80' }],
      'www.example.net.': [{ type: QTYPE.A, address: '192.0.2.81' }],
    },
  });
  cleanups.push(
    () => cluster.close(),
    () => outside.close(),
  );
  const fwPort = await freePort();
  const fwMetrics = await freePort();
  const forwarder = await launchProcess({
    script: `${root}/packages/forwarder/dist/main.js`,
    args: [
      '--listen-address=127.0.0.1',
      `--port=${fwPort}`,
      '--no-resolv',
      `--server=/cluster.local/127.0.0.1#${cluster.port}`,
      `--server=127.0.0.2#${outside.port}`,
      // Small per-client rates, TCP (a node cache's misses come over TCP) and UDP.
      '--client-tcp-qps=20',
      '--client-tcp-burst=20',
      '--client-qps=20',
      '--client-burst=20',
      '--cache-size=0',
      '--metrics-address=127.0.0.1',
      `--metrics-port=${fwMetrics}`,
      '--lameduck=0s',
      ...(trust ? ['--trust-client-address-from=127.0.0.1/32'] : []),
    ],
  });
  cleanups.push(() => forwarder.stop());
  const ncPort = await freePort();
  const corefile = [
    `cluster.local:${ncPort} {`,
    '    bind 127.0.0.1',
    `    forward . 127.0.0.1:${fwPort} {`,
    '        force_tcp',
    '    }',
    '}',
    // A stub domain straight to the world outside: its queries must not name the pod.
    `example.org:${ncPort} {`,
    '    bind 127.0.0.1',
    `    forward . 127.0.0.2:${outside.port}`,
    '}',
    // The rest through the Pod's forwarder (the cluster's DNS), which asks the world anew.
    `.:${ncPort} {`,
    '    bind 127.0.0.1',
    `    forward . 127.0.0.1:${fwPort}`,
    '}',
    '',
  ].join('\n');
  const nodeCache: LaunchedProcess = await launchProcess({
    script: `${root}/packages/forwarder/dist/node-cache-main.js`,
    readyMsg: 'node cache ready',
    // -upstreamsvc's ClusterIP (kube-dns by default), as the kubelet sets it: the cluster's DNS.
    env: { KUBE_DNS_SERVICE_HOST: '127.0.0.1' },
    // The node cache's own per-pod limit off: what is measured is the Pod's forwarder's.
    args: await loopbackNodeCacheArgs(corefile, ['-client-qps=0', '-client-tcp-qps=0', '-workers=1']),
  });
  cleanups.push(() => nodeCache.stop());
  const ask = (from: string, name: string, port = ncPort) =>
    queryDns({ host: '127.0.0.1', port }, name, QTYPE.A, { localAddress: from, timeoutMs: 5000 }).then(
      (m) => m.flags.rcode,
      () => -1,
    );
  const metric = async (series: string) => {
    const text = await (await fetch(`http://127.0.0.1:${fwMetrics}/metrics`)).text();
    return Number(new RegExp(`^${series.replace(/[{}]/g, '\\$&')} (\\S+)`, 'm').exec(text)?.[1] ?? Number.NaN);
  };
  return { cluster, outside, ask, metric, fwPort, fwMetrics };
}

/** The flooder's 120 distinct misses at once, and the neighbour's five lookups in the middle of them. */
async function floodBesideNeighbour(ask: (from: string, name: string) => Promise<number>) {
  const flood = Array.from({ length: 120 }, (_, i) => ask(FLOODER, `miss-${i}.shop.svc.cluster.local`));
  const neighbour: number[] = [];
  for (let i = 0; i < 5; i++) neighbour.push(await ask(NEIGHBOUR, 'web.shop.svc.cluster.local'));
  return { flooder: await Promise.all(flood), neighbour };
}

describe('the asking pod, named through the node cache', () => {
  it('counts each pod’s misses against its own rate at the Pod’s forwarder: a flooding pod leaves its neighbour answered', async () => {
    const s = await start(true);
    const { flooder, neighbour } = await floodBesideNeighbour(s.ask);
    expect(neighbour).toEqual([RCODE.NOERROR, RCODE.NOERROR, RCODE.NOERROR, RCODE.NOERROR, RCODE.NOERROR]);
    // The flooder was held to its own share: some of its 120 were refused at the Pod's forwarder.
    expect(flooder.filter((r) => r === RCODE.NXDOMAIN).length).toBeLessThan(120);
    expect(await s.metric('clusterdns_forwarder_limited_total{reason="client_refused"}')).toBeGreaterThan(0);
    expect(await s.metric('clusterdns_forwarder_client_identity_total{result="carried"}')).toBeGreaterThanOrEqual(20);
    expect(await s.metric('clusterdns_forwarder_client_identity_total{result="forged"}')).toBe(0);
    // The Pod's forwarder asks anew: neither the cluster's DNS behind it nor the world outside
    // (asked by the node cache's stub block or by the Pod's forwarder) sees a pod's address.
    expect(s.cluster.queries.some((q) => clientAddressOf(q.raw) !== undefined)).toBe(false);
    expect(await s.ask(NEIGHBOUR, 'www.example.org')).toBe(RCODE.NOERROR);
    expect(await s.ask(NEIGHBOUR, 'www.example.net')).toBe(RCODE.NOERROR);
    expect(s.outside.queries.map((q) => q.name).sort()).toEqual(['www.example.net.', 'www.example.org.']);
    expect(s.outside.queries.every((q) => clientAddressOf(q.raw) === undefined)).toBe(true);
  }, 60_000);

  it('without trust, every pod behind the node cache shares the node’s rate: the neighbour is refused with the flooder', async () => {
    const s = await start(false);
    const { neighbour } = await floodBesideNeighbour(s.ask);
    expect(neighbour.some((r) => r !== RCODE.NOERROR)).toBe(true);
    // Nobody trusted: no name is read at all.
    expect(await s.metric('clusterdns_forwarder_client_identity_total{result="carried"}')).toBe(0);
  }, 60_000);

  it('ignores and counts a pod that names another pod itself: it is limited as who it is', async () => {
    const s = await start(true);
    // A query with EDNS whose OPT names the neighbour: what a node cache would send.
    const plain = encodeMessage(
      buildQueryMessage(7, 'web.shop.svc.cluster.local', QTYPE.A, { edns: { udpSize: 1232 } }),
    );
    const opt = encodeOptRecord({
      udpSize: 1232,
      option: { code: CLIENT_ADDRESS_OPTION, data: encodeClientAddress(NEIGHBOUR) },
    });
    const named = Buffer.concat([plain.subarray(0, plain.length - OPT_RECORD_BYTES), opt]);
    expect(clientAddressOf(named)).toBe(NEIGHBOUR);
    for (let i = 0; i < 3; i++) {
      const reply = decodeMessage(
        await exchangeRaw({ host: '127.0.0.1', port: s.fwPort }, named, { localAddress: STRANGER, timeoutMs: 5000 }),
      );
      expect(reply.flags.rcode).toBe(RCODE.NOERROR);
    }
    expect(await s.metric('clusterdns_forwarder_client_identity_total{result="forged"}')).toBe(3);
  }, 60_000);
});
