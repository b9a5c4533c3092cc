import { Buffer } from 'node:buffer';
import dgram from 'node:dgram';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import {
  freePort,
  type LaunchedProcess,
  launchProcess,
  loopbackNodeCacheArgs,
  node22Binary,
  startTestUpstream,
  type TestUpstream,
  waitFor,
} from '@cluster-dns/testkit';
import {
  buildQueryMessage,
  decodeMessage,
  encodeMessage,
  parseQuery,
  QTYPE,
  queryDns,
  RCODE,
  type Rr,
} from '@cluster-dns/wire';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// One misbehaving client must not take DNS from the others: each defence, through the real
// process on loopback, in the four shapes it runs in (the Pod's forwarder and node-local mode,
// each with one worker and with two). Clients are told apart by their source address in
// 127.0.0.0/8. The limits are set low, so each attack is small and quick. The shed (what waits in
// the kernel past --shed-after is dropped unread) has its own suite below: here its bound is out
// of reach, or on a starved host a flood's backlog is shed whole, the queries queued behind it with
// it, and what is under test is each client's own limit.

const root = fileURLToPath(new URL('..', import.meta.url));
const FORWARDER = `${root}/packages/forwarder/dist/main.js`;
const NODE_CACHE = `${root}/packages/forwarder/dist/node-cache-main.js`;
const node22 = node22Binary();
if ('unavailable' in node22) console.warn(`skipping the two-worker isolation tests: ${node22.unavailable}`);

/** The limits every shape runs with: a client's fair share is 100 UDP queries a second here. */
const LIMITS = {
  'client-qps': 100,
  'client-burst': 100,
  'client-slip': 2,
  'rrl-responses-per-second': 5,
  'rrl-min-bytes': 512,
  'subdomain-guard-misses': 30,
  'subdomain-guard-hold': '60s',
  'jostle-timeout': '100ms',
  'tcp-write-timeout': '1s',
  'shed-after': '30s',
};
const SHARE = 20;
const A = (address: string): Rr => ({ name: '', type: QTYPE.A, class: 1, ttl: 300, address });
/** 200 addresses: over 3 KiB over TCP, a 1232-octet truncated reply over UDP. */
const BIG = Array.from({ length: 200 }, (_, i) => A(`10.244.${i >> 8}.${i & 255}`));

interface Served {
  port: number;
  metricsPort: number;
  process: LaunchedProcess;
}

/** A UDP server that reads every query and answers none: an upstream that is down. */
async function blackHole() {
  const socket = dgram.createSocket({ type: 'udp4', recvBufferSize: 4 * 1024 * 1024 });
  const names: string[] = [];
  socket.on('message', (m) => names.push(parseQuery(m).qname.toLowerCase()));
  await new Promise<void>((r) => socket.bind(0, '127.0.0.1', () => r()));
  return { port: socket.address().port, names, close: () => socket.close() };
}

type Shape = {
  name: string;
  skip: boolean;
  start(cluster: number, hole: number, extra?: Record<string, string | number>): Promise<Served>;
};

const flagsOf = (dash: string, values: Record<string, string | number>) =>
  Object.entries(values).map(([k, v]) => `${dash}${k}=${v}`);

function forwarderShape(workers: number): Shape {
  return {
    name: workers === 1 ? 'the Pod’s forwarder' : 'the Pod’s forwarder, --workers=2',
    skip: workers > 1 && 'unavailable' in node22,
    async start(cluster, hole, extra = {}) {
      const process = await launchProcess({
        script: FORWARDER,
        ...(workers > 1 && 'path' in node22 ? { nodeBinary: node22.path } : {}),
        args: [
          '-k',
          '--no-resolv',
          '--listen-address=127.0.0.1',
          '--port=0',
          '--metrics-port=0',
          '--metrics-address=127.0.0.1',
          '--lameduck=0s',
          '--cache-size=1000',
          `--dns-forward-max=${SHARE}`,
          `--server=/cluster.local/127.0.0.1#${cluster}`,
          `--server=127.0.0.1#${hole}`,
          `--workers=${workers}`,
          ...flagsOf('--', { ...LIMITS, ...extra }),
        ],
      });
      return { port: Number(process.ready.port), metricsPort: Number(process.ready.metricsPort), process };
    },
  };
}

function nodeCacheShape(workers: number): Shape {
  return {
    name: workers === 1 ? 'node-local mode' : 'node-local mode, -workers=2',
    skip: workers > 1 && 'unavailable' in node22,
    async start(cluster, hole, extra = {}) {
      const port = await freePort();
      const metricsPort = await freePort();
      const block = (zone: string, to: number) => `${zone}:${port} {
    bind 127.0.0.1
    cache 30
    forward . 127.0.0.1:${to} {
        max_concurrent ${SHARE}
    }
    prometheus 127.0.0.1:${metricsPort}
}
`;
      const corefile = block('cluster.local', cluster) + block('.', hole);
      const process = await launchProcess({
        script: NODE_CACHE,
        ...(workers > 1 && 'path' in node22 ? { nodeBinary: node22.path } : {}),
        readyMsg: 'node cache ready',
        args: await loopbackNodeCacheArgs(corefile, [`-workers=${workers}`, ...flagsOf('-', { ...LIMITS, ...extra })]),
      });
      return { port, metricsPort, process };
    },
  };
}

const metricsOf = async (s: Served) => (await fetch(`http://127.0.0.1:${s.metricsPort}/metrics`)).text();
const metric = (text: string, series: string) =>
  Number(new RegExp(`^${series.replace(/[{}]/g, '\\$&')} (\\S+)`, 'm').exec(text)?.[1] ?? 0);
const rssMiB = (pid: number) =>
  Number(/^VmRSS:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;

/** A raw UDP client on one source address: sends queries with the IDs given, keeps every reply by ID. */
async function rawClient(localAddress: string) {
  const socket = dgram.createSocket({ type: 'udp4', recvBufferSize: 4 * 1024 * 1024 });
  await new Promise<void>((r) => socket.bind(0, localAddress, () => r()));
  const replies = new Map<number, Buffer>();
  socket.on('message', (m) => replies.set(m.readUInt16BE(0), m));
  return {
    replies,
    send(port: number, id: number, name: string, qtype: number = QTYPE.A) {
      socket.send(encodeMessage(buildQueryMessage(id, name, qtype, { edns: { udpSize: 1232 } })), port, '127.0.0.1');
    },
    close: () => socket.close(),
  };
}

const ask = (s: Served, from: string, name: string, qtype: number = QTYPE.A, transport: 'udp' | 'tcp' = 'udp') =>
  queryDns({ host: '127.0.0.1', port: s.port }, name, qtype, {
    localAddress: from,
    transport,
    timeoutMs: 5000,
    edns: { udpSize: 1232 },
  });

const shapes = [forwarderShape(1), forwarderShape(2), nodeCacheShape(1), nodeCacheShape(2)];

describe.each(shapes)('isolation: $name', (shape) => {
  let cluster: TestUpstream;
  let hole: Awaited<ReturnType<typeof blackHole>>;
  let served: Served;

  beforeAll(async () => {
    if (shape.skip) return;
    cluster = await startTestUpstream({
      records: {
        'web.shop.svc.cluster.local.': [A('10.96.0.20')],
        'big.shop.svc.cluster.local.': BIG,
        'multi.shop.svc.cluster.local.': [
          A('10.96.0.21'),
          { name: '', type: QTYPE.TXT, class: 1, ttl: 300, text: ['x'.repeat(200)] },
          { name: '', type: QTYPE.AAAA, class: 1, ttl: 300, address: 'fd00::21' },
        ],
      },
    });
    hole = await blackHole();
    served = await shape.start(cluster.port, hole.port);
  });
  afterAll(async () => {
    await served?.process.stop();
    await cluster?.close();
    hole?.close();
  });

  it.skipIf(shape.skip)(
    'refuses one client past its rate (every second refusal a TC) while ten others get every answer',
    async () => {
      const flooder = await rawClient('127.0.0.2');
      for (let id = 0; id < 2000; id++) flooder.send(served.port, id, 'web.shop.svc.cluster.local');
      const others = await Promise.all(
        Array.from({ length: 10 }, async (_, i) => {
          const rcodes: number[] = [];
          for (let n = 0; n < 20; n++)
            rcodes.push((await ask(served, `127.0.0.${3 + i}`, 'web.shop.svc.cluster.local')).flags.rcode);
          return rcodes;
        }),
      );
      expect(others.flat().filter((r) => r !== RCODE.NOERROR)).toEqual([]);
      await waitFor(() => flooder.replies.size >= 1900, {
        what: 'the flood answered',
        seen: () => flooder.replies.size,
      });
      const kinds = [...flooder.replies.values()].map((m) => {
        const d = decodeMessage(m);
        return d.flags.rcode === RCODE.NOERROR ? 'answer' : d.flags.tc ? 'tc' : 'refused';
      });
      const count = (k: string) => kinds.filter((x) => x === k).length;
      // 100 at once and 100 a second: a few hundred answers at most, the rest turned away.
      expect(count('answer'), JSON.stringify({ answer: count('answer'), tc: count('tc') })).toBeLessThan(600);
      expect(count('tc')).toBeGreaterThan(500);
      expect(count('refused')).toBeGreaterThan(500);
      const text = await metricsOf(served);
      expect(metric(text, 'clusterdns_forwarder_limited_total{reason="client_refused"}')).toBeGreaterThan(500);
      expect(metric(text, 'clusterdns_forwarder_limited_total{reason="client_truncated"}')).toBeGreaterThan(500);
      flooder.close();
    },
  );

  it.skipIf(shape.skip)(
    'water torture: the cluster zone stays answered, the guard trips, and the dead upstream is asked each name once, then nothing under it',
    async () => {
      const attacker = await rawClient('127.0.0.20');
      for (let i = 0; i < 150; i++) attacker.send(served.port, i, `r${i}.victim.example.org`);
      // Meanwhile another pod's cluster names, each a miss: answered, never refused for the outside route's traffic.
      for (let i = 0; i < 40; i++)
        expect((await ask(served, '127.0.0.21', `c${i}.shop.svc.cluster.local`)).flags.rcode).toBe(RCODE.NXDOMAIN);
      await waitFor(
        async () => metric(await metricsOf(served), 'clusterdns_forwarder_subdomain_guard_trips_total') >= 1,
        {
          what: 'the random-subdomain guard to trip',
          seen: () => hole.names.length,
        },
      );
      expect(new Set(hole.names).size).toBe(hole.names.length);
      const askedBefore = hole.names.length;
      const late = await rawClient('127.0.0.22');
      for (let i = 0; i < 20; i++) late.send(served.port, i, `late${i}.victim.example.org`);
      await waitFor(() => late.replies.size === 20, { what: 'the late names answered', seen: () => late.replies.size });
      expect([...late.replies.values()].map((m) => decodeMessage(m).flags.rcode)).toEqual(
        Array(20).fill(RCODE.SERVFAIL),
      );
      // Another domain is still asked.
      void ask(served, '127.0.0.23', 'www.example.net').catch(() => undefined);
      await waitFor(() => hole.names.includes('www.example.net.'), { what: 'www.example.net asked upstream' });
      expect(hole.names.slice(askedBefore).filter((n) => n.endsWith('victim.example.org.'))).toEqual([]);
      const text = await metricsOf(served);
      expect(metric(text, 'clusterdns_forwarder_subdomain_guard_answered_total')).toBeGreaterThanOrEqual(20);
      expect(metric(text, 'clusterdns_forwarder_route_refused_total{route="cluster.local."}')).toBe(0);
      expect(served.process.logs.some((l) => String(l.msg).startsWith('random-subdomain guard tripped'))).toBe(true);
      attacker.close();
      late.close();
    },
  );

  it.skipIf(shape.skip)(
    'TCP clients that pipeline and never read cost bounded memory, are closed at the write timeout, and a reading client is answered',
    async () => {
      const pid = served.process.child.pid as number;
      await ask(served, '127.0.0.30', 'big.shop.svc.cluster.local', QTYPE.A, 'tcp');
      const warm = rssMiB(pid);
      const query = encodeMessage(buildQueryMessage(1, 'big.shop.svc.cluster.local', QTYPE.A));
      const frame = Buffer.concat([Buffer.from([query.length >> 8, query.length & 0xff]), query]);
      const stalled = await Promise.all(
        Array.from(
          { length: 20 },
          (_, i) =>
            new Promise<net.Socket>((resolve, reject) => {
              const s = net.connect({ port: served.port, host: '127.0.0.1', localAddress: `127.0.0.${31 + i}` }, () => {
                s.pause();
                s.write(Buffer.concat(Array.from({ length: 5000 }, () => frame)));
                resolve(s);
              });
              s.on('error', () => undefined);
              s.once('error', reject);
            }),
        ),
      );
      // 100,000 answers of 3 KiB asked: 300 MiB if every one were buffered here.
      await waitFor(
        async () =>
          metric(await metricsOf(served), 'clusterdns_forwarder_tcp_stalled_closed_total{reason="timeout"}') >= 20,
        {
          what: 'every stalled connection closed at the write timeout',
          timeoutMs: 20_000,
        },
      );
      const peak = rssMiB(pid);
      // Buffered whole, the answers would add 300 MiB. Bounded, what is taken is what the kernel's
      // socket buffers hold (a few MiB a connection on loopback) and 64 KiB more, and the growth is
      // the heap's garbage from making those answers, not yet returned.
      console.log(`${shape.name}: RSS ${warm.toFixed(0)} → ${peak.toFixed(0)} MiB with 20 stalled TCP readers`);
      expect(peak - warm, `RSS ${warm.toFixed(0)} → ${peak.toFixed(0)} MiB`).toBeLessThan(160);
      const answer = await ask(served, '127.0.0.60', 'big.shop.svc.cluster.local', QTYPE.A, 'tcp');
      expect(answer.answers).toHaveLength(200);
      for (const s of stalled) s.destroy();
    },
    30_000,
  );

  it.skipIf(shape.skip)(
    'limits identical large answers to one address (RRL, slip 2), and answers ANY with one RRset',
    async () => {
      const client = await rawClient('127.0.0.50');
      for (let id = 0; id < 40; id++) client.send(served.port, id, 'big.shop.svc.cluster.local');
      await waitFor(
        async () => {
          const text = await metricsOf(served);
          return (
            metric(text, 'clusterdns_forwarder_limited_total{reason="rrl_dropped"}') +
              metric(text, 'clusterdns_forwarder_limited_total{reason="rrl_truncated"}') >=
            25
          );
        },
        { what: 'the large answers limited' },
      );
      await waitFor(() => client.replies.size >= 20, { what: 'the answers sent', seen: () => client.replies.size });
      const replies = [...client.replies.values()].map((m) => ({ tc: decodeMessage(m).flags.tc, bytes: m.length }));
      const full = replies.filter((r) => r.bytes >= 512);
      // Five a second, at once; the rest dropped, or every second one a question-only TC.
      expect(full.length, JSON.stringify(replies)).toBeLessThanOrEqual(10);
      expect(replies.filter((r) => r.tc && r.bytes < 100).length).toBeGreaterThanOrEqual(10);
      expect(client.replies.size).toBeLessThan(40);
      client.close();
      const any = await ask(served, '127.0.0.51', 'multi.shop.svc.cluster.local', QTYPE.ANY);
      expect(any.answers.map((r) => r.type)).toEqual([QTYPE.A]);
    },
  );
});

describe.each(shapes)('shedding: $name', (shape) => {
  it.skipIf(shape.skip)(
    'drops what queued while it was stopped once the backlog outlasts --shed-after, then answers fresh queries',
    async () => {
      const cluster = await startTestUpstream({ records: { 'web.shop.svc.cluster.local.': [A('10.96.0.20')] } });
      const hole = await blackHole();
      const served = await shape.start(cluster.port, hole.port, { 'shed-after': '10ms', 'client-qps': 0 });
      try {
        await ask(served, '127.0.0.70', 'web.shop.svc.cluster.local');
        const flooder = await rawClient('127.0.0.71');
        // Stopped, it reads nothing: the kernel queues what comes (4 MiB: a few thousand queries).
        served.process.child.kill('SIGSTOP');
        for (let id = 0; id < 3000; id++) flooder.send(served.port, id, 'web.shop.svc.cluster.local');
        await waitFor(() => flooder.replies.size === 0 && socketQueued(served.port) >= 1000, {
          what: 'the queries queued for the stopped process',
          seen: () => socketQueued(served.port),
        });
        served.process.child.kill('SIGCONT');
        await waitFor(
          async () => metric(await metricsOf(served), 'clusterdns_forwarder_limited_total{reason="shed"}') > 0,
          {
            what: 'queries shed',
          },
        );
        // A query that came while the backlog was still being dropped is dropped with it: a client
        // asks again, as this one does, and is answered once the queue has emptied.
        await waitFor(
          async () =>
            (
              await queryDns({ host: '127.0.0.1', port: served.port }, 'web.shop.svc.cluster.local', QTYPE.A, {
                localAddress: '127.0.0.72',
                timeoutMs: 500,
              }).catch(() => undefined)
            )?.flags.rcode === RCODE.NOERROR,
          { what: 'a fresh query answered after the shedding' },
        );
        // What was dropped was never answered.
        const shed = metric(await metricsOf(served), 'clusterdns_forwarder_limited_total{reason="shed"}');
        expect(flooder.replies.size, `shed ${shed}`).toBeLessThan(3000);
        flooder.close();
      } finally {
        served.process.child.kill('SIGCONT');
        await served.process.stop();
        await cluster.close();
        hole.close();
      }
    },
    30_000,
  );
});

/** Datagrams waiting in the kernel for UDP port `port` on 127.0.0.1, summed over its sockets (SO_REUSEPORT), from /proc/net/udp. */
function socketQueued(port: number): number {
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  let bytes = 0;
  for (const line of readFileSync('/proc/net/udp', 'utf8').split('\n').slice(1)) {
    const fields = line.trim().split(/\s+/);
    if (fields[1] !== `0100007F:${hexPort}`) continue;
    bytes += Number.parseInt((fields[4] ?? '0:0').split(':')[1] ?? '0', 16);
  }
  // A small datagram takes about a kilobyte of the socket's buffer (its skb's truesize).
  return Math.floor(bytes / 1024);
}
