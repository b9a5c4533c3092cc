import dgram from 'node:dgram';
import { fileURLToPath } from 'node:url';
import {
  fixtures,
  freePort,
  launchProcess,
  loopbackNodeCacheArgs,
  node22Binary,
  runCommand,
  waitFor,
} from '@cluster-dns/testkit';
import { buildQueryMessage, decodeMessage, encodeMessage, QCLASS, QTYPE, queryDns } from '@cluster-dns/wire';
import { afterEach, describe, expect, it } from 'vitest';
import { baseCluster, startStack } from './support/stack.js';

// --workers=2 on a Node 22 binary (SO_REUSEPORT), as the images run it: two forwarders on one
// port in one process sharing one cache, whose drops worker 0's zone sync makes.
const node22 = node22Binary();
if ('unavailable' in node22) console.warn(`skipping the --workers test: ${node22.unavailable}`);

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const NAME = 'web.shop.svc.cluster.local';
const web = (ip: string) => fixtures.service('shop', 'web', { clusterIPs: [ip], ports: [{ name: 'http', port: 80 }] });

/** Many client sockets, each its own source port: SO_REUSEPORT sends each to one worker, and keeps it there. */
async function clients(n: number, port: number) {
  const sockets = await Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<dgram.Socket>((resolve) => {
          const s = dgram.createSocket('udp4');
          s.bind(0, '127.0.0.1', () => resolve(s));
        }),
    ),
  );
  cleanups.push(async () => {
    for (const s of sockets) s.close();
  });
  let id = 1;
  const ask = (socket: dgram.Socket, name: string, qtype: number, qclass: number = QCLASS.IN) =>
    new Promise<ReturnType<typeof decodeMessage>>((resolve, reject) => {
      const want = id++ & 0xffff;
      const timer = setTimeout(() => reject(new Error(`no answer to ${name} in 3 s`)), 3000);
      const onMessage = (m: Buffer) => {
        if (m.readUInt16BE(0) !== want) return;
        clearTimeout(timer);
        socket.off('message', onMessage);
        resolve(decodeMessage(m));
      };
      socket.on('message', onMessage);
      const query = buildQueryMessage(want, name, qtype);
      query.questions[0] = { name: query.questions[0]?.name ?? name, type: qtype, class: qclass };
      socket.send(encodeMessage(query), port, '127.0.0.1');
    });
  /** Each socket's answer: the A record's address. */
  const addresses = () =>
    Promise.all(
      sockets.map(async (s) => (await ask(s, NAME, QTYPE.A)).answers.find((a) => a.type === QTYPE.A)?.address),
    );
  return { sockets, ask, addresses };
}

const metric = (text: string, series: string) =>
  Number(new RegExp(`^${series.replace(/[{}]/g, '\\$&')} (\\S+)`, 'm').exec(text)?.[1] ?? Number.NaN);

describe.skipIf('unavailable' in node22)('forwarder --workers=2 (Node 22, SO_REUSEPORT)', () => {
  it('spreads clients over both workers, asks the record-builder once for a name both miss, shows a pushed change to every client at once, and sums CHAOS and /metrics', async () => {
    const stack = await startStack({
      objects: [...baseCluster().filter((o) => o.metadata.name !== 'web'), web('10.96.1.10')],
      fwNodeBinary: 'path' in node22 ? node22.path : undefined,
      fwArgs: ['--workers=2'],
    });
    cleanups.push(() => stack.close());
    expect(stack.fw.ready.workers).toBe(2);
    const metrics = async () => (await fetch(`http://127.0.0.1:${stack.fw.ready.metricsPort}/metrics`)).text();
    await waitFor(async () => metric(await metrics(), 'clusterdns_forwarder_zone_serial{zone="cluster.local."}') > 0, {
      what: 'the cluster zone pushed (the record-builder’s first NOTIFY)',
    });

    const forwarded = (text: string) =>
      [...text.matchAll(/^coredns_forward_requests_total\{[^}]*\} (\S+)$/gm)].reduce((n, m) => n + Number(m[1]), 0);
    const forwardedBefore = forwarded(await metrics());
    const c = await clients(40, stack.fwPort);
    expect(new Set(await c.addresses())).toEqual(new Set(['10.96.1.10']));
    // Cached now, once for both workers (TTL 30 s): a second round is all hits.
    expect(new Set(await c.addresses())).toEqual(new Set(['10.96.1.10']));
    const before = await metrics();
    // 40 ports asking at once, over both workers: the record-builder was asked once. The first
    // worker to miss asked; the other waited for its answer in the shared cache, then hit it.
    expect(forwarded(before) - forwardedBefore).toBe(1);
    const perWorker = [0, 1].map((w) => metric(before, `clusterdns_forwarder_worker_queries_total{worker="${w}"}`));
    // 40 source ports: all on one worker would be 2^-39.
    for (const n of perWorker) expect(n).toBeGreaterThan(0);
    expect((perWorker[0] ?? 0) + (perWorker[1] ?? 0)).toBeGreaterThanOrEqual(80);
    // Every worker's process metrics are the one process's: exported once, not summed.
    expect(before.match(/^process_resident_memory_bytes /gm)?.length).toBe(1);

    // The change: every socket, whichever worker holds it, sees the new address long before the
    // 30 s TTL would let its cache go.
    stack.api.apply(web('10.96.1.99'));
    const started = performance.now();
    let seen: unknown[] = [];
    await waitFor(
      async () => {
        seen = await c.addresses();
        return seen.every((a) => a === '10.96.1.99');
      },
      {
        what: 'the new address for every client, whichever worker has it',
        timeoutMs: 10_000,
        seen: () => seen.join(','),
      },
    );
    expect(performance.now() - started).toBeLessThan(10_000);

    // One IXFR per change for the process (worker 0's), and every cache dropped the name.
    const after = await metrics();
    const serial = (await queryDns({ host: '127.0.0.1', port: stack.rbPort }, 'cluster.local', QTYPE.SOA)).answers[0]
      ?.soa?.serial;
    expect(metric(after, 'clusterdns_forwarder_zone_serial{zone="cluster.local."}')).toBe(serial);
    expect(metric(after, 'clusterdns_forwarder_cache_invalidated_total')).toBeGreaterThanOrEqual(1);

    // dnsmasq's statistics over DNS: the sum of both workers, whichever one is asked.
    const hits = metric(after, 'clusterdns_forwarder_cache_hits_total');
    const misses = metric(after, 'clusterdns_forwarder_cache_misses_total');
    // A miss before the change and one after, at least, whichever workers had them.
    expect(misses).toBeGreaterThanOrEqual(2);
    for (const socket of c.sockets.slice(0, 6)) {
      const txt = async (name: string) =>
        Number((await c.ask(socket, name, QTYPE.TXT, QCLASS.CH)).answers[0]?.text?.[0] ?? Number.NaN);
      expect(await txt('hits.bind')).toBe(hits);
      expect(await txt('misses.bind')).toBe(misses);
    }

    expect(await stack.fw.stop('SIGTERM')).toBe(0);
  });

  it('starts its workers from the image’s bundle too, where every module is inlined into the entry', async () => {
    const root = fileURLToPath(new URL('..', import.meta.url));
    const bundled = await runCommand(process.execPath, [`${root}/docker/bundle.mjs`], { timeoutMs: 120_000 });
    expect(bundled.status, bundled.stderr).toBe(0);
    const fw = await launchProcess({
      script: `${root}/packages/forwarder/bundle/main.js`,
      nodeBinary: 'path' in node22 ? node22.path : undefined,
      args: [
        '--workers=2',
        '--listen-address=127.0.0.1',
        '--port=0',
        '--no-resolv',
        '--server=127.0.0.1#1',
        '--metrics-address=127.0.0.1',
        '--metrics-port=0',
        '--lameduck=0s',
      ],
    });
    cleanups.push(() => fw.stop());
    expect(fw.ready.workers).toBe(2);
    const hits = await queryDns({ host: '127.0.0.1', port: fw.ready.port as number }, 'hits.bind', QTYPE.TXT, {
      qclass: QCLASS.CH,
    });
    expect(hits.answers).toHaveLength(1);

    // The node-cache image's entry, with its own worker entry: on loopback, no link and no rules.
    const port = await freePort();
    const corefile = `.:${port} {\n    bind 127.0.0.1\n    cache 30\n    forward . 127.0.0.1:1\n    prometheus 127.0.0.1:${await freePort()}\n}\n`;
    const cache = await launchProcess({
      script: `${root}/packages/forwarder/bundle/node-cache-main.js`,
      nodeBinary: 'path' in node22 ? node22.path : undefined,
      readyMsg: 'node cache ready',
      args: await loopbackNodeCacheArgs(corefile, ['-workers=2']),
    });
    cleanups.push(() => cache.stop());
    expect(cache.logs.find((l) => l.msg === 'ready')?.workers).toBe(2);
    const chaos = await queryDns({ host: '127.0.0.1', port }, 'hits.bind', QTYPE.TXT, { qclass: QCLASS.CH });
    expect(chaos.answers).toHaveLength(1);
  }, 150_000);
});
