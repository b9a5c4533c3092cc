import { fileURLToPath } from 'node:url';
import {
  freePort,
  type LaunchedProcess,
  launchProcess,
  loopbackNodeCacheArgs,
  node22Binary,
  runCommand,
  startTestUpstream,
  type TestUpstream,
} from '@cluster-dns/testkit';
import { QTYPE, queryDns, RCODE } from '@cluster-dns/wire';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// A Corefile's acl in a node cache, through the real process on loopback, pods told apart by
// their source address: by net, by type, and by namespace (the client map, served here by a
// stand-in for the cluster's DNS). A name cached for an allowed pod is still refused to a blocked
// one: no hit is answered before the acl, by worker 0 or by a lane.

const root = fileURLToPath(new URL('..', import.meta.url));
const node22 = node22Binary();
const shapes = [
  { workers: 1, skip: false },
  { workers: 2, skip: 'unavailable' in node22 },
];

describe.each(shapes)('acl in a node cache, -workers=$workers', ({ workers, skip }) => {
  let cluster: TestUpstream;
  let nodeCache: LaunchedProcess;
  let port = 0;
  let metricsPort = 0;
  const ask = (from: string, name: string, qtype: number = QTYPE.A) =>
    queryDns({ host: '127.0.0.1', port }, name, qtype, { localAddress: from, timeoutMs: 1500 }).then(
      (m) => m.flags.rcode,
      () => 'dropped',
    );

  beforeAll(async () => {
    if (skip) return;
    cluster = await startTestUpstream({
      records: {
        'web.shop.svc.cluster.local.': [{ type: QTYPE.A, address: '10.96.0.20' }],
        'secret.shop.svc.cluster.local.': [{ type: QTYPE.TXT, text: ['s3cr3t'] }],
        '127-0-0-5.client.dns.cluster.local.': [{ type: QTYPE.TXT, text: ['namespace=shop', 'search=default'] }],
        '127-0-0-6.client.dns.cluster.local.': [{ type: QTYPE.TXT, text: ['namespace=other', 'search=default'] }],
      },
    });
    port = await freePort();
    metricsPort = await freePort();
    const corefile = `cluster.local:${port} {
    bind 127.0.0.1
    acl {
        drop net 127.0.0.66/32
        allow namespace shop
        block type TXT
    }
    cache 30
    forward . 127.0.0.1:${cluster.port}
    prometheus 127.0.0.1:${metricsPort}
}
`;
    nodeCache = await launchProcess({
      script: `${root}/packages/forwarder/dist/node-cache-main.js`,
      ...(workers > 1 && 'path' in node22 ? { nodeBinary: node22.path } : {}),
      readyMsg: 'node cache ready',
      args: await loopbackNodeCacheArgs(corefile, [`-workers=${workers}`, '-namespace-metrics=1']),
    });
  });
  afterAll(async () => {
    await nodeCache?.stop();
    await cluster?.close();
  });

  it.skipIf(skip)(
    'allows by namespace, blocks by type, drops by net, and a cached answer does not slip past',
    async () => {
      // Asked and cached by a pod of shop, from several ports (so both workers' sockets are reached).
      for (let i = 0; i < 8; i++)
        expect(await ask('127.0.0.5', 'secret.shop.svc.cluster.local', QTYPE.TXT)).toBe(RCODE.NOERROR);
      for (let i = 0; i < 8; i++)
        expect(await ask('127.0.0.6', 'secret.shop.svc.cluster.local', QTYPE.TXT)).toBe(RCODE.REFUSED);
      expect(await ask('127.0.0.7', 'secret.shop.svc.cluster.local', QTYPE.TXT)).toBe(RCODE.REFUSED);
      expect(await ask('127.0.0.6', 'web.shop.svc.cluster.local')).toBe(RCODE.NOERROR);
      expect(await ask('127.0.0.66', 'web.shop.svc.cluster.local')).toBe('dropped');
      const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
      const counted = (action: string) =>
        [
          ...text.matchAll(new RegExp(`^clusterdns_forwarder_acl_total\\{action="${action}"[^}]*\\} (\\d+)`, 'gm')),
        ].reduce((n, m) => n + Number(m[1]), 0);
      expect([counted('block'), counted('drop')]).toEqual([9, 1]);
    },
  );
  it.skipIf(skip)('counts every query by the asking pod’s namespace, over every worker', async () => {
    const series = async () => {
      const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
      return Object.fromEntries(
        [...text.matchAll(/^clusterdns_forwarder_namespace_queries_total\{namespace="([^"]+)"[^}]*\} (\d+)/gm)].map(
          (m) => [m[1], Number(m[2])],
        ),
      ) as Record<string, number>;
    };
    const before = await series();
    // From many source ports, so with two workers both sockets take some.
    for (let i = 0; i < 12; i++) await ask('127.0.0.5', 'web.shop.svc.cluster.local');
    for (let i = 0; i < 7; i++) await ask('127.0.0.6', 'web.shop.svc.cluster.local');
    const after = await series();
    // shop asked first (the test above): the one named series; other is every other namespace.
    expect([(after.shop ?? 0) - (before.shop ?? 0), (after.other ?? 0) - (before.other ?? 0)]).toEqual([12, 7]);
  });
});

describe('acl in the Pod’s forwarder by flag (--acl), as kube-dns’s Deployment runs it', () => {
  let cluster: TestUpstream;
  let forwarder: LaunchedProcess;
  const ask = (from: string, name: string, qtype: number = QTYPE.A) =>
    queryDns({ host: '127.0.0.1', port: Number(forwarder.ready.port) }, name, qtype, {
      localAddress: from,
      timeoutMs: 1500,
    }).then(
      (m) => m.flags.rcode,
      () => 'dropped',
    );

  beforeAll(async () => {
    cluster = await startTestUpstream({
      records: { 'web.shop.svc.cluster.local.': [{ type: QTYPE.A, address: '10.96.0.20' }] },
    });
    forwarder = await launchProcess({
      script: `${root}/packages/forwarder/dist/main.js`,
      args: [
        '-k',
        '--no-resolv',
        '--listen-address=127.0.0.1',
        '--port=0',
        `--server=/cluster.local/127.0.0.1#${cluster.port}`,
        '--metrics-port=0',
        '--lameduck=0s',
        '--acl=allow net 127.0.0.5',
        '--acl=block type TXT ANY',
        '--acl=drop net 127.0.0.66/32',
      ],
    });
  });
  afterAll(async () => {
    await forwarder?.stop();
    await cluster?.close();
  });

  it('takes the first matching rule of the flags, in order, before any cached answer', async () => {
    expect(await ask('127.0.0.5', 'web.shop.svc.cluster.local', QTYPE.TXT)).toBe(RCODE.NOERROR);
    expect(await ask('127.0.0.6', 'web.shop.svc.cluster.local', QTYPE.TXT)).toBe(RCODE.REFUSED);
    expect(await ask('127.0.0.5', 'web.shop.svc.cluster.local')).toBe(RCODE.NOERROR);
    expect(await ask('127.0.0.66', 'web.shop.svc.cluster.local')).toBe('dropped');
    expect(await ask('127.0.0.6', 'web.shop.svc.cluster.local')).toBe(RCODE.NOERROR);
  });

  it('refuses a bad rule naming the flag', async () => {
    const bad = await runCommand(process.execPath, [
      `${root}/packages/forwarder/dist/main.js`,
      '--acl=deny net 10.0.0.0/8',
    ]);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/--acl.*the action must be allow, block, filter, drop/);
  });
});
