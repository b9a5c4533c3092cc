import dgram from 'node:dgram';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import {
  fixtures,
  freePort,
  type LaunchedProcess,
  launchProcess,
  loopbackNodeCacheArgs,
  startApiServer,
  waitFor,
} from '@cluster-dns/testkit';
import { QTYPE, queryDns, RCODE } from '@cluster-dns/wire';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { baseCluster, pgSlice, type Stack, startStack } from './support/stack.js';

// Two cluster DNS Pods (record-builder, and the forwarder relaying node caches' transfers) on one
// API, and a node cache whose cluster zone goes, over its kept TCP connection, through a stand-in
// for the kube-dns-upstream Service to one Pod. When that Pod's connections go (a rollout, a
// drain), the next reaches the other Pod, which answers the node's copy from the position it
// holds: what changed, never the whole zone nor a flush, though the second Pod started later.
const root = fileURLToPath(new URL('..', import.meta.url));

/** The Service in front of the Pods: each connection to the Pod `to` names; `moveTo` resets them all. */
async function service(target: number) {
  let to = target;
  const open = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const pod = net.connect({ host: '127.0.0.1', port: to });
    open.add(client).add(pod);
    const close = () => {
      client.destroy();
      pod.destroy();
      open.delete(client);
      open.delete(pod);
    };
    client.pipe(pod).pipe(client);
    client.on('error', close).on('close', close);
    pod.on('error', close).on('close', close);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return {
    port: (server.address() as net.AddressInfo).port,
    moveTo(port: number) {
      to = port;
      for (const socket of open) socket.destroy();
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of open) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/** A UDP path to `target` that drops everything until opened (answers come back the same way). */
async function udpRelay(target: number) {
  const front = dgram.createSocket('udp4');
  const back = dgram.createSocket('udp4');
  await new Promise<void>((r) => front.bind(0, '127.0.0.1', () => r()));
  await new Promise<void>((r) => back.bind(0, '127.0.0.1', () => r()));
  let opened = false;
  const askers = new Map<number, dgram.RemoteInfo>();
  front.on('message', (msg, rinfo) => {
    if (!opened || msg.length < 2) return;
    askers.set(msg.readUInt16BE(0), rinfo);
    back.send(msg, target, '127.0.0.1');
  });
  back.on('message', (msg) => {
    const asker = msg.length >= 2 ? askers.get(msg.readUInt16BE(0)) : undefined;
    if (asker) front.send(msg, asker.port, asker.address);
  });
  return {
    port: front.address().port,
    open: () => {
      opened = true;
    },
    close: () => {
      front.close();
      back.close();
    },
  };
}

const counter = (text: string, name: string, labels = '') =>
  Number(new RegExp(`^${name}${labels.replace(/[{}]/g, '\\$&')} (\\S+)`, 'm').exec(text)?.[1] ?? 0);
const metricsOf = async (port: number) => (await fetch(`http://127.0.0.1:${port}/metrics`)).text();

describe('a node cache whose Pod goes: caught up by the next one, from its position', () => {
  let api: Awaited<ReturnType<typeof startApiServer>>;
  let a: Stack;
  let b: Stack | undefined;
  let proxy: Awaited<ReturnType<typeof service>>;
  let cache: LaunchedProcess;
  let cachePort: number;
  let cacheMetrics: number;
  let notifyPort: number;
  let notifyRelay: Awaited<ReturnType<typeof udpRelay>> | undefined;

  const pod = (extra: { api: typeof api; notifyPort?: number }) =>
    startStack({
      api: extra.api,
      rbArgs: [`--notify-node-cache=127.0.0.1:${extra.notifyPort ?? notifyPort}`],
      fwArgs: ['--transfer-relay-from=127.0.0.1/32'],
    });
  const ask = (name: string) => queryDns({ host: '127.0.0.1', port: cachePort }, name, QTYPE.A, { timeoutMs: 2000 });
  const addresses = async (name: string) => {
    const reply = await ask(name);
    return reply.flags.rcode === RCODE.NXDOMAIN ? 'NXDOMAIN' : reply.answers.map((r) => r.address).join(',');
  };
  const transfers = async (result: string) =>
    counter(await metricsOf(cacheMetrics), 'clusterdns_forwarder_zone_transfers_total', `{result="${result}"}`);
  const served = async (rb: LaunchedProcess, result: string) =>
    counter(
      await metricsOf(rb.ready.metricsPort as number),
      'clusterdns_recordbuilder_zone_transfers_total',
      `{type="ixfr",result="${result}"}`,
    );
  const serialOf = async (port: number) =>
    (await queryDns({ host: '127.0.0.1', port }, 'cluster.local', QTYPE.SOA)).answers[0]?.soa?.serial;

  beforeAll(async () => {
    api = await startApiServer({ objects: baseCluster() });
    notifyPort = await freePort();
    a = await pod({ api });
    proxy = await service(a.fwPort);
    cachePort = await freePort();
    cacheMetrics = await freePort();
    const corefile = [
      `cluster.local:${cachePort} {`,
      '    bind 127.0.0.1',
      '    cache 30',
      `    prometheus 127.0.0.1:${cacheMetrics}`,
      `    forward . 127.0.0.1:${proxy.port} {`,
      '        force_tcp',
      '    }',
      '}',
      '',
    ].join('\n');
    cache = await launchProcess({
      script: `${root}/packages/forwarder/dist/node-cache-main.js`,
      readyMsg: 'node cache ready',
      args: await loopbackNodeCacheArgs(corefile, ['-workers=1'], { notifyListen: `127.0.0.1:${notifyPort}` }),
    });
  });
  afterAll(async () => {
    await cache?.stop();
    notifyRelay?.close();
    await proxy?.close();
    await b?.close();
    await a?.close();
    await api?.close();
  });

  it('moves to a Pod started after its copy was made, catching up by IXFR with no flush', async () => {
    // Pushed by the first Pod, and answering from its cache.
    await waitFor(async () => (await transfers('incremental')) + (await transfers('up-to-date')) > 0, {
      what: 'the node cache in push mode',
    });
    expect(await addresses('web.shop.svc.cluster.local')).toBe('10.96.1.10');
    api.apply(fixtures.service('shop', 'late', { clusterIPs: ['10.96.1.20'] }));
    await waitFor(async () => (await addresses('late.shop.svc.cluster.local')) === '10.96.1.20', {
      what: 'a new Service pushed to the node cache',
    });

    // A second Pod starts (a rollout's new replica): it lists what the first watched happen. The
    // node is not its to push to while the first is there (rendezvous): its NOTIFYs go nowhere
    // until then, as if it took the node when the first went.
    notifyRelay = await udpRelay(notifyPort);
    b = await pod({ api, notifyPort: notifyRelay.port });
    // The same events applied: the same serial, though each counted from its own start.
    await waitFor(async () => (await serialOf(b?.rbPort as number)) === (await serialOf(a.rbPort)), {
      what: 'both replicas at one serial',
      seen: async () => `${await serialOf(a.rbPort)} ${await serialOf(b?.rbPort as number)}`,
    });

    // The first Pod goes: its connections are reset, and the node's next one reaches the second.
    proxy.moveTo(b.fwPort);
    await a.fw.stop('SIGKILL');
    await a.rb.stop('SIGKILL');
    const fullBefore = await transfers('full');
    const incrementalBefore = await transfers('incremental');
    // Changes only the second Pod can push now: a Service gone, an endpoint added. Its first
    // NOTIFY to the node carries no names (it has none answered from it): the node fetches, by
    // IXFR, from the position its copy holds.
    api.remove('Service', 'shop', 'web');
    api.apply(pgSlice(41));
    notifyRelay.open();
    await waitFor(async () => (await addresses('web.shop.svc.cluster.local')) === 'NXDOMAIN', {
      what: 'the deleted Service gone from the node cache',
    });
    await waitFor(async () => (await addresses('pg-40.pg.data.svc.cluster.local')) === '10.244.1.41', {
      what: 'the new endpoint at the node cache',
    });
    // By IXFR from the copy's position, answered by the second record-builder: no whole zone,
    // no flush, and what the first Pod pushed still cached.
    expect(await transfers('incremental')).toBeGreaterThan(incrementalBefore);
    expect(await transfers('full')).toBe(fullBefore);
    expect(await served(b.rb, 'full')).toBe(0);
    expect(await served(b.rb, 'incremental')).toBeGreaterThan(0);
    // The node's first fetch there was answered from the position it handed back (with the
    // changes, or, when it came first, with nothing yet and the second Pod's position), not its
    // serial alone; its next ones are the second Pod's own.
    const text = await metricsOf(b.rb.ready.metricsPort as number);
    const byPosition = (result: string) =>
      counter(text, 'clusterdns_recordbuilder_ixfr_positions_total', `{result="${result}"}`);
    expect(byPosition('incremental') + byPosition('current')).toBeGreaterThan(0);
    expect(byPosition('full')).toBe(0);
    expect(await addresses('late.shop.svc.cluster.local')).toBe('10.96.1.20');
  });
});
