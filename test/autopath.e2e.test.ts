import { Buffer } from 'node:buffer';
import { fileURLToPath } from 'node:url';
import {
  autopathArgs,
  fixtures,
  freePort,
  type KubeObject,
  type LaunchedProcess,
  launchProcess,
  loopbackNodeCacheArgs,
  waitFor,
} from '@cluster-dns/testkit';
import {
  buildQueryMessage,
  CLIENT_ADDRESS_OPTION,
  type DecodedMessage,
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
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { baseCluster, type Stack, startStack } from './support/stack.js';

// Server-side search through the real processes on loopback, switched on as an operator does, by
// components/autopath (its rendered args): testkit's API server with pods, the record-builder
// watching them (--pods=verified, its client map), the Pod's forwarder with --autopath, and a node
// cache in front. Pods are told apart by their source address in
// 127.0.0.0/8, each address a pod's IP in the API server.

const root = fileURLToPath(new URL('..', import.meta.url));
const APP = '127.0.0.5'; // testns/app: the kubelet's default search path
const CUSTOM = '127.0.0.6'; // testns/custom: a dnsConfig of its own
const NEIGHBOUR = '127.0.0.8'; // testns/neighbour, behind the node cache
const OTHER = '127.0.0.9'; // other/explicit: asks testns's names by their full names
const OUTSIDE = 'api.example.com';

function podWith(namespace: string, name: string, ip: string, spec: Record<string, unknown> = {}): KubeObject {
  const pod = fixtures.pod(namespace, name, [ip]);
  return { ...pod, spec: { ...(pod.spec as object), ...spec } } as KubeObject;
}

const answers = (m: DecodedMessage) => m.answers.map((r) => `${r.name} ${r.target ?? r.address}`);

describe('autopath: a pod’s search walk answered by the cluster’s DNS', () => {
  let stack: Stack;
  let nodeCache: LaunchedProcess;
  let ncPort = 0;
  let metricsPort = 0;
  const ask = (from: string, name: string, port = stack.fwPort, qtype: number = QTYPE.A) =>
    queryDns({ host: '127.0.0.1', port }, name, qtype, { localAddress: from, timeoutMs: 3000 });
  /** APP's walk of `name`, asked until it finds the Service just created (a CNAME and its address). */
  const untilWalkFinds = async (name: string): Promise<DecodedMessage> => {
    let last: DecodedMessage | undefined;
    await waitFor(
      async () => {
        last = await ask(APP, name);
        return last.answers.length === 2;
      },
      { what: 'the new Service through the walk', seen: () => last && answers(last) },
    );
    return last as DecodedMessage;
  };
  const upstreamAsked = (name: string) =>
    stack.upstream.queries.filter((q) => q.name.toLowerCase() === `${name}.`).length;

  beforeAll(async () => {
    // What components/autopath adds to the Pod, rendered by kubectl kustomize with the "nodes"
    // (here the node cache on loopback) given as an operator gives them: the flags run below.
    const component = await autopathArgs('127.0.0.1/32');
    expect(component.kubedns).toEqual(['--pods=verified']);
    expect([...component.dnsmasq].sort()).toEqual([
      '--autopath=cluster.local',
      '--trust-client-address-from=127.0.0.1/32',
    ]);
    metricsPort = await freePort();
    stack = await startStack({
      objects: [
        ...baseCluster(),
        podWith('testns', 'app', APP),
        podWith('testns', 'custom', CUSTOM, { dnsConfig: { searches: ['corp.example'] } }),
        podWith('testns', 'neighbour', NEIGHBOUR),
        podWith('other', 'explicit', OTHER),
      ],
      rbArgs: component.kubedns,
      fwArgs: [...component.dnsmasq, `--metrics-port=${metricsPort}`, '--namespace-metrics=1'],
      upstreamRecords: {
        [`${OUTSIDE}.`]: [{ type: QTYPE.A, address: '192.0.2.10', ttl: 300 }],
        'www.example.org.': [{ type: QTYPE.A, address: '192.0.2.8', ttl: 300 }],
      },
    });
    ncPort = await freePort();
    const corefile = [
      `cluster.local:${ncPort} {`,
      '    bind 127.0.0.1',
      '    cache 30',
      `    forward . 127.0.0.1:${stack.fwPort} {`,
      '        force_tcp',
      '    }',
      '}',
      `.:${ncPort} {`,
      '    bind 127.0.0.1',
      '    cache 30',
      `    forward . 127.0.0.1:${stack.fwPort}`,
      '}',
      '',
    ].join('\n');
    nodeCache = await launchProcess({
      script: `${root}/packages/forwarder/dist/node-cache-main.js`,
      readyMsg: 'node cache ready',
      env: { KUBE_DNS_SERVICE_HOST: '127.0.0.1' },
      args: await loopbackNodeCacheArgs(corefile, ['-workers=1']),
    });
  });
  afterAll(async () => {
    await nodeCache?.stop();
    await stack?.close();
  });

  it('answers an outside name’s first step with a CNAME to it: one question where the pod would ask four', async () => {
    const reply = await ask(APP, `${OUTSIDE}.testns.svc.cluster.local`);
    expect(reply.flags.rcode).toBe(RCODE.NOERROR);
    expect(answers(reply)).toEqual([`${OUTSIDE}.testns.svc.cluster.local. ${OUTSIDE}.`, `${OUTSIDE}. 192.0.2.10`]);
    // AAAA through the same step: NODATA behind the same CNAME.
    const aaaa = await ask(APP, `${OUTSIDE}.testns.svc.cluster.local`, stack.fwPort, QTYPE.AAAA);
    expect([aaaa.flags.rcode, aaaa.answers.map((r) => r.target)]).toEqual([RCODE.NOERROR, [`${OUTSIDE}.`]]);
    expect(upstreamAsked(OUTSIDE)).toBe(2);
    // And again from the cache: the steps are cached, the walk is not (the upstream is not asked).
    expect(answers(await ask(APP, `${OUTSIDE}.testns.svc.cluster.local`))).toHaveLength(2);
    expect(upstreamAsked(OUTSIDE)).toBe(2);
  });

  it('finds a short name in another namespace, and answers a name of the pod’s own namespace as it is', async () => {
    expect(answers(await ask(APP, 'web.shop.testns.svc.cluster.local'))).toEqual([
      'web.shop.testns.svc.cluster.local. web.shop.svc.cluster.local.',
      'web.shop.svc.cluster.local. 10.96.1.10',
    ]);
    const none = await ask(APP, 'nothing.example.testns.svc.cluster.local');
    expect([none.flags.rcode, none.answers.length]).toEqual([RCODE.NXDOMAIN, 0]);
    // What a walk learnt of the names above its steps (RFC 8020) leaves a namespace that exists
    // asked: the record-builder answers `shop.svc.cluster.local` NODATA, not NXDOMAIN.
    const ent = await queryDns({ host: '127.0.0.1', port: stack.rbPort }, 'shop.svc.cluster.local', QTYPE.A);
    expect([ent.flags.rcode, ent.answers.length]).toEqual([RCODE.NOERROR, 0]);
    expect((await ask(APP, 'api.shop.testns.svc.cluster.local')).flags.rcode).toBe(RCODE.NXDOMAIN);
    expect(answers(await ask(APP, 'web.shop.testns.svc.cluster.local', stack.fwPort, QTYPE.AAAA))).toEqual([
      'web.shop.testns.svc.cluster.local. web.shop.svc.cluster.local.',
      'web.shop.svc.cluster.local. fd00::10',
    ]);
  });

  it('walks for nobody else: a pod with its own dnsConfig, an unknown address, a pod of another namespace', async () => {
    for (const from of [CUSTOM, '127.0.0.77'])
      expect((await ask(from, `${OUTSIDE}.testns.svc.cluster.local`)).flags.rcode).toBe(RCODE.NXDOMAIN);
    // The other pod asks testns's name explicitly: the name as it is, never the walk made for APP.
    expect((await ask(OTHER, `${OUTSIDE}.testns.svc.cluster.local`)).flags.rcode).toBe(RCODE.NXDOMAIN);
    const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    expect(
      Number(/clusterdns_forwarder_autopath_total\{result="skipped"\} (\d+)/.exec(text)?.[1]),
    ).toBeGreaterThanOrEqual(3);
  });

  it('keeps the client map from pods: REFUSED directly and through the node cache, though walks read it', async () => {
    const name = `${APP.replace(/\./g, '-')}.client.dns.cluster.local`;
    // Walks have read (and cached) this entry; a pod asking for it still gets nothing.
    expect(answers(await ask(APP, `${OUTSIDE}.testns.svc.cluster.local`))).toHaveLength(2);
    for (const [from, port] of [
      [APP, stack.fwPort],
      [OTHER, stack.fwPort],
      [NEIGHBOUR, ncPort],
    ] as const)
      for (const qtype of [QTYPE.TXT, QTYPE.ANY])
        expect([from, qtype, (await ask(from, name, port, qtype)).flags.rcode]).toEqual([from, qtype, RCODE.REFUSED]);
    const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    expect(Number(/^clusterdns_forwarder_client_map_refused_total (\d+)/m.exec(text)?.[1])).toBeGreaterThanOrEqual(4);
  });

  it('follows a Service created after a walk found nothing: the change is pushed through the walk’s steps', async () => {
    const name = 'fresh.shop.testns.svc.cluster.local';
    expect((await ask(APP, name)).flags.rcode).toBe(RCODE.NXDOMAIN);
    stack.api.apply(
      fixtures.service('shop', 'fresh', { clusterIPs: ['10.96.1.77'], ports: [{ name: 'http', port: 80 }] }),
    );
    expect(answers(await untilWalkFinds(name))).toEqual([
      `${name}. fresh.shop.svc.cluster.local.`,
      'fresh.shop.svc.cluster.local. 10.96.1.77',
    ]);
  });

  it('keeps a walk’s answer for the pod’s namespace until the push drops it: a deleted Service is not answered from it', async () => {
    const kept = async () => {
      const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
      return Number(/clusterdns_forwarder_autopath_total\{result="kept"\} (\d+)/.exec(text)?.[1]);
    };
    stack.api.apply(
      fixtures.service('shop', 'brief', { clusterIPs: ['10.96.1.78'], ports: [{ name: 'http', port: 80 }] }),
    );
    const name = 'brief.shop.testns.svc.cluster.local';
    await untilWalkFinds(name);
    let last: DecodedMessage | undefined;
    // The Service's pushes (its zone, then the reverse zone) may land after the walk that found it,
    // each dropping what was kept before it: ask until a walk is answered as kept.
    const before = await kept();
    await waitFor(
      async () => {
        last = await ask(APP, name);
        return (await kept()) > before;
      },
      { what: 'a walk answered from the kept answer', seen: () => last && answers(last) },
    );
    expect(answers(last as DecodedMessage)).toEqual([
      `${name}. brief.shop.svc.cluster.local.`,
      'brief.shop.svc.cluster.local. 10.96.1.78',
    ]);
    // Another namespace's pod asking the same name in full gets the cluster's NXDOMAIN, not the kept walk.
    expect((await ask(OTHER, name)).flags.rcode).toBe(RCODE.NXDOMAIN);
    stack.api.remove('Service', 'shop', 'brief');
    await waitFor(async () => (await ask(APP, name)).flags.rcode === RCODE.NXDOMAIN, {
      what: 'the walk to the deleted Service dropped by the push',
    });
  });

  it('behind the node cache: walks for the pod it names, and the node cache serves that answer to nobody else', async () => {
    const reply = await ask(NEIGHBOUR, `${OUTSIDE}.testns.svc.cluster.local`, ncPort);
    expect(answers(reply)).toEqual([`${OUTSIDE}.testns.svc.cluster.local. ${OUTSIDE}.`, `${OUTSIDE}. 192.0.2.10`]);
    // The same name from a pod of another namespace, through the same node cache: not the walk.
    expect((await ask(OTHER, `${OUTSIDE}.testns.svc.cluster.local`, ncPort)).flags.rcode).toBe(RCODE.NXDOMAIN);
    // A pod of another namespace naming a testns pod itself, straight to the Pod's forwarder: not
    // believed (it is not a node), so not walked, and counted.
    const plain = encodeMessage(
      buildQueryMessage(7, `${OUTSIDE}.testns.svc.cluster.local`, QTYPE.A, { edns: { udpSize: 1232 } }),
    );
    const opt = encodeOptRecord({
      udpSize: 1232,
      option: { code: CLIENT_ADDRESS_OPTION, data: encodeClientAddress(NEIGHBOUR) },
    });
    const forged = Buffer.concat([plain.subarray(0, plain.length - OPT_RECORD_BYTES), opt]);
    const notWalked = decodeMessage(
      await exchangeRaw({ host: '127.0.0.1', port: stack.fwPort }, forged, { localAddress: OTHER, timeoutMs: 3000 }),
    );
    expect(notWalked.flags.rcode).toBe(RCODE.NXDOMAIN);
    const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    expect(
      Number(/clusterdns_forwarder_client_identity_total\{result="forged"\} (\d+)/.exec(text)?.[1]),
    ).toBeGreaterThanOrEqual(1);
  });

  it('counts queries by the asking pod’s namespace, behind the node cache too, in at most N series and other', async () => {
    const series = async () => {
      const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
      return Object.fromEntries(
        [...text.matchAll(/^clusterdns_forwarder_namespace_queries_total\{namespace="([^"]+)"\} (\d+)/gm)].map((m) => [
          m[1],
          Number(m[2]),
        ]),
      ) as Record<string, number>;
    };
    const before = await series();
    for (let i = 0; i < 3; i++) await ask(APP, 'web.shop.svc.cluster.local');
    // Names the node cache has not cached, so each reaches the Pod's forwarder, naming the pod.
    for (let i = 0; i < 2; i++) await ask(NEIGHBOUR, `counted${i}.shop.svc.cluster.local`, ncPort);
    for (let i = 0; i < 4; i++) await ask(OTHER, 'web.shop.svc.cluster.local');
    await ask('127.0.0.77', 'web.shop.svc.cluster.local');
    const after = await series();
    const moved = (ns: string) => (after[ns] ?? 0) - (before[ns] ?? 0);
    // testns was the first namespace seen (earlier tests asked from its pods): the one named
    // series of --namespace-metrics=1; every other namespace is "other".
    expect(Object.keys(after).sort()).toEqual(['other', 'testns', 'unknown']);
    expect(moved('testns')).toBeGreaterThanOrEqual(5);
    expect(moved('other')).toBeGreaterThanOrEqual(4);
    expect(moved('unknown')).toBeGreaterThanOrEqual(1);
  });

  it('never walks for an address’s old pod: a reused address is the new pod’s once the change is pushed', async () => {
    const name = `${OUTSIDE}.testns.svc.cluster.local`;
    expect(answers(await ask(APP, name))).toHaveLength(2);
    stack.api.remove('Pod', 'testns', 'app');
    stack.api.apply(podWith('other', 'reborn', APP));
    let rcode = -1;
    await waitFor(
      async () => {
        rcode = (await ask(APP, name)).flags.rcode;
        return rcode === RCODE.NXDOMAIN;
      },
      { what: 'the old pod’s walk to stop', seen: () => rcode },
    );
    expect(answers(await ask(APP, `${OUTSIDE}.other.svc.cluster.local`))).toEqual([
      `${OUTSIDE}.other.svc.cluster.local. ${OUTSIDE}.`,
      `${OUTSIDE}. 192.0.2.10`,
    ]);
  });
});
