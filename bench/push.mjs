// Case 6 of pnpm bench: how fast a change shows through the forwarder's warm cache (TTL 30 s),
// with the record-builder pushing its changes (--notify) and without; with NOTIFYs lost (the SOA
// check); cluster-zone queries an ndots:5 search walk costs the record-builder; stale answers
// while the upstream is down.
import dgram from 'node:dgram';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fixtures, freePort, startApiServer, startTestUpstream } from '@cluster-dns/testkit';
import { QTYPE, queryDns, RCODE } from '@cluster-dns/wire';
import { LOCAL_FORWARDER, ROOT, recordBuilderArgs, round, SCRATCH, SERVER_CORE, startOurs } from './lib.mjs';

const Z = 'svc.cluster.local';
const ip = (base, i) => `10.${base}.${i >> 8}.${i & 255}`;

function clusterObjects(count) {
  const objects = [fixtures.service('default', 'kubernetes', { clusterIPs: ['10.96.0.1'] })];
  for (let i = 0; i < count; i++) {
    objects.push(fixtures.service('prop', `web-${i}`, { clusterIPs: [ip(96, i + 256)] }));
    objects.push(fixtures.service('prop', `h-${i}`, { headless: true }));
    objects.push(
      fixtures.endpointSlice('prop', `h-${i}`, `h-${i}-0`, [{ addresses: [ip(120, i)] }, { addresses: [ip(122, i)] }]),
    );
    objects.push(fixtures.service('prop', `ext-${i}`, { externalName: 'a.example.org' }));
  }
  return objects;
}

/** A UDP relay on the NOTIFY path that can be cut. */
async function notifyRelay() {
  const front = dgram.createSocket('udp4');
  const back = dgram.createSocket('udp4');
  await new Promise((r) => front.bind(0, '127.0.0.1', r));
  await new Promise((r) => back.bind(0, '127.0.0.1', r));
  const state = { cut: false, target: 0 };
  const peers = new Map();
  front.on('message', (msg, rinfo) => {
    if (state.cut || !state.target) return;
    peers.set(msg.readUInt16BE(0), rinfo);
    back.send(msg, state.target, '127.0.0.1');
  });
  back.on('message', (msg) => {
    const peer = peers.get(msg.readUInt16BE(0));
    if (peer && !state.cut) front.send(msg, peer.port, peer.address);
  });
  return {
    port: front.address().port,
    state,
    close: () => {
      front.close();
      back.close();
    },
  };
}

async function startPair({ count, notify, forwarderExtra = [], recordBuilderExtra = [] }) {
  const api = await startApiServer({ objects: clusterObjects(count) });
  const kubeconfig = join(await mkdtemp(join(SCRATCH, 'bench-push-')), 'kubeconfig');
  await api.writeKubeconfig(kubeconfig);
  const external = await startTestUpstream({
    records: {
      'a.example.org.': [{ type: QTYPE.A, address: '192.0.2.1', ttl: 300 }],
      'b.example.org.': [{ type: QTYPE.A, address: '192.0.2.2', ttl: 300 }],
    },
  });
  const fwPort = await freePort();
  const relay = notify === 'relay' ? await notifyRelay() : undefined;
  const notifyArgs = notify === 'none' ? [] : [`--notify=127.0.0.1:${relay ? relay.port : fwPort}`];
  const rb = await startOurs(
    'record-builder',
    recordBuilderArgs(kubeconfig, [...notifyArgs, ...recordBuilderExtra]),
    SERVER_CORE,
  );
  const rbPort = rb.ready.dnsPort;
  const fw = await startOurs(
    'forwarder',
    [
      '-k',
      '--cache-size=10000',
      '--no-negcache',
      '--no-resolv',
      '--listen-address=127.0.0.1',
      `--port=${fwPort}`,
      `--server=/cluster.local/127.0.0.1#${rbPort}`,
      `--server=/in-addr.arpa/127.0.0.1#${rbPort}`,
      `--server=/ip6.arpa/127.0.0.1#${rbPort}`,
      `--server=${external.address}`,
      '--lameduck=0s',
      '--metrics-port=0',
      '--metrics-address=127.0.0.1',
      ...forwarderExtra,
    ],
    SERVER_CORE,
  );
  if (relay) relay.state.target = fwPort;
  const metrics = async (proc) => (await fetch(`http://127.0.0.1:${proc.ready.metricsPort}/metrics`)).text();
  if (notify !== 'none') {
    const deadline = performance.now() + 30_000;
    while (!/^clusterdns_forwarder_zone_serial\{zone="cluster.local."\} [1-9]/m.test(await metrics(fw))) {
      if (performance.now() > deadline) throw new Error('the forwarder never got the first NOTIFY');
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  return {
    api,
    rb,
    fw,
    fwPort,
    relay,
    external,
    metrics,
    stop: async () => {
      await fw.stop();
      await rb.stop();
      relay?.close();
      await external.close();
      await api.close();
    },
  };
}

const ask = (port, name, type = QTYPE.A) => queryDns({ host: '127.0.0.1', port }, name, type, { timeoutMs: 2000 });
const answerAddresses = (m) =>
  m.answers
    .filter((a) => a.type === QTYPE.A)
    .map((a) => a.address)
    .sort()
    .join();

/** Time until `check` holds, asking every millisecond; null when not within `limitMs`. */
async function until(check, limitMs) {
  const t0 = performance.now();
  while (!(await check())) {
    if (performance.now() - t0 > limitMs) return null;
    await new Promise((r) => setTimeout(r, 1));
  }
  return performance.now() - t0;
}

function summary(times, extra = {}) {
  const done = times.filter((t) => t !== null).sort((a, b) => a - b);
  const pick = (q) => (done.length ? round(done[Math.min(done.length - 1, Math.floor(done.length * q))], 2) : null);
  return {
    changes: times.length,
    notVisible: times.length - done.length,
    p50Ms: pick(0.5),
    p99Ms: pick(0.99),
    maxMs: pick(1),
    ...extra,
  };
}

/**
 * The four kinds of change, `count` of each, one at a time, each timed until visible through
 * `port`; `gapMs` between one change being visible and the next being made.
 */
async function changeKinds(pair, port, count, limitMs, gapMs = 0) {
  const { api } = pair;
  const out = {};
  const kinds = {
    'Service re-created with a new cluster IP': async (i) => {
      const name = `web-${i}.prop.${Z}`;
      await ask(port, name);
      const next = ip(97, i);
      api.remove('Service', 'prop', `web-${i}`);
      api.apply(fixtures.service('prop', `web-${i}`, { clusterIPs: [next] }));
      return until(async () => answerAddresses(await ask(port, name)) === next, limitMs);
    },
    'endpoint turned not ready': async (i) => {
      const name = `h-${i}.prop.${Z}`;
      await ask(port, name);
      api.apply(
        fixtures.endpointSlice('prop', `h-${i}`, `h-${i}-0`, [
          { addresses: [ip(120, i)] },
          { addresses: [ip(122, i)], ready: false },
        ]),
      );
      return until(async () => answerAddresses(await ask(port, name)) === ip(120, i), limitMs);
    },
    'ExternalName target changed': async (i) => {
      const name = `ext-${i}.prop.${Z}`;
      await ask(port, name);
      api.apply(fixtures.service('prop', `ext-${i}`, { externalName: 'b.example.org' }));
      return until(async () => answerAddresses(await ask(port, name)) === '192.0.2.2', limitMs);
    },
    'new Service over a cached NXDOMAIN': async (i) => {
      const name = `late-${i}.prop.${Z}`;
      await ask(port, name);
      await ask(port, name);
      api.apply(fixtures.service('prop', `late-${i}`, { clusterIPs: [ip(98, i)] }));
      return until(async () => (await ask(port, name)).flags.rcode === RCODE.NOERROR, limitMs);
    },
  };
  for (const [kind, change] of Object.entries(kinds)) {
    const times = [];
    for (let i = 0; i < count; i++) {
      if (gapMs > 0) await new Promise((r) => setTimeout(r, gapMs));
      times.push(await change(i));
    }
    out[kind] = times;
  }
  return out;
}

/** Cluster-zone queries the record-builder sees for `walks` ndots:5 walks of an outside name, A and AAAA. */
async function searchWalks(pair, walks) {
  const search = ['shop.svc.cluster.local', 'svc.cluster.local', 'cluster.local', 'us-east1.internal', 'corp.internal'];
  const count = async () =>
    Number(
      /^skydns_skydns_dns_request_count_total\{system="auth"\} (\d+)/m.exec(await pair.metrics(pair.rb))?.[1] ?? 0,
    );
  const before = await count();
  for (let w = 0; w < walks; w++)
    for (const suffix of [...search, ''])
      for (const type of [QTYPE.A, QTYPE.AAAA])
        await ask(pair.fwPort, suffix ? `www.example.org.${suffix}` : 'www.example.org', type);
  return {
    walks,
    recordBuilderQueries: (await count()) - before,
    perWalk: round(((await count()) - before) / walks, 2),
  };
}

export async function runPropagation({ row, quick }) {
  const count = quick ? 20 : 200;

  // Pushed: the manifest's setup.
  const pushed = await startPair({ count, notify: 'direct' });
  try {
    for (const [kind, times] of Object.entries(await changeKinds(pushed, pushed.fwPort, count, 10_000)))
      row(`6. propagation with --notify: ${kind}`, 'cluster-dns', summary(times));
    const fw = await pushed.metrics(pushed.fw);
    const rbm = await pushed.metrics(pushed.rb);
    const sum = (text, name) =>
      [...text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)`, 'gm'))].reduce((a, m) => a + Number(m[1]), 0);
    row('6. propagation with --notify: counters', 'cluster-dns', {
      notifiesSent: sum(rbm, 'clusterdns_recordbuilder_notifies_sent_total'),
      notifiesAccepted: sum(fw, 'clusterdns_forwarder_notifies_received_total'),
      ixfrs: sum(fw, 'clusterdns_forwarder_zone_transfers_total'),
      invalidated: sum(fw, 'clusterdns_forwarder_cache_invalidated_total'),
      rbPropagationMeanMs: round(
        (sum(rbm, 'clusterdns_recordbuilder_notify_propagation_seconds_sum') /
          Math.max(1, sum(rbm, 'clusterdns_recordbuilder_notify_propagation_seconds_count'))) *
          1000,
        2,
      ),
    });
    row('6. ndots:5 search walk, pushed negative caching', 'cluster-dns', await searchWalks(pushed, quick ? 20 : 100));
  } finally {
    await pushed.stop();
  }

  // Through a node cache (node-local mode, pushed): the path a pod's query takes on a node with
  // NodeLocal DNSCache, where the target is p99 ≤ 100 ms (30 s, the TTL, for node-cache).
  await nodeCachePropagation({ row, count: quick ? 20 : 100 });

  // NOTIFYs lost after push mode began: the SOA check (default 5 s) is what catches the changes.
  const lossy = await startPair({ count: 20, notify: 'relay' });
  try {
    lossy.relay.state.cut = true;
    const times = await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        const name = `web-${i}.prop.${Z}`;
        await ask(lossy.fwPort, name);
        lossy.api.apply(fixtures.service('prop', `web-${i}`, { clusterIPs: [ip(99, i)] }));
        return until(async () => answerAddresses(await ask(lossy.fwPort, name)) === ip(99, i), 15_000);
      }),
    );
    row('6. propagation with NOTIFYs lost (--soa-check-interval=5s)', 'cluster-dns', summary(times));
  } finally {
    await lossy.stop();
  }

  // Without --notify: kube-dns's behaviour, bounded by the 30 s TTL.
  const plain = await startPair({ count: quick ? 10 : 40, notify: 'none' });
  try {
    const n = quick ? 10 : 40;
    const times = await Promise.all(
      Array.from({ length: n }, async (_, i) => {
        const name = `h-${i}.prop.${Z}`;
        await ask(plain.fwPort, name);
        await new Promise((r) => setTimeout(r, Math.random() * 2000));
        plain.api.apply(
          fixtures.endpointSlice('prop', `h-${i}`, `h-${i}-0`, [
            { addresses: [ip(120, i)] },
            { addresses: [ip(122, i)], ready: false },
          ]),
        );
        return until(async () => answerAddresses(await ask(plain.fwPort, name)) === ip(120, i), 40_000);
      }),
    );
    row('6. propagation without --notify (TTL 30 s): endpoint turned not ready', 'cluster-dns', summary(times));
    row(
      '6. ndots:5 search walk, --no-negcache without push',
      'cluster-dns',
      await searchWalks(plain, quick ? 20 : 100),
    );
  } finally {
    await plain.stop();
  }

  // The upstream goes down: names it answered (TTL 1 s) are served stale.
  const upstream = await startTestUpstream({
    records: Object.fromEntries(
      Array.from({ length: 100 }, (_, i) => [`n${i}.example.net.`, [{ type: QTYPE.A, address: '192.0.2.9', ttl: 1 }]]),
    ),
  });
  const stale = await startOurs('forwarder', [...LOCAL_FORWARDER, `--server=${upstream.address}`], SERVER_CORE);
  try {
    for (let i = 0; i < 100; i++) await ask(stale.ready.port, `n${i}.example.net`);
    upstream.set({ behaviour: 'servfail' });
    await new Promise((r) => setTimeout(r, 1100));
    const times = [];
    let answered = 0;
    for (let i = 0; i < 100; i++) {
      const t0 = performance.now();
      const reply = await ask(stale.ready.port, `n${i}.example.net`);
      times.push(performance.now() - t0);
      if (reply.flags.rcode === RCODE.NOERROR && reply.answers[0]?.ttl === 30) answered++;
    }
    row('6. upstream down: expired answers served stale', 'cluster-dns', {
      ...summary(times),
      staleAnswered: answered,
    });
  } finally {
    await stale.stop();
    await upstream.close();
  }
}

/**
 * The record-builder, the Pod's forwarder relaying transfers, and a node cache in front (node-cache
 * main, its Corefile's cluster block forwarding over TCP to the Pod's forwarder, no link or rules:
 * on 127.0.0.1 and ports of its own); the record-builder NOTIFYs the node cache, which fetches the
 * changes through the Pod's forwarder. Each change is timed until visible through the node cache.
 */
export async function nodeCachePropagation({ row, count }) {
  const [notifyPort, metricsPort, setupPort, cachePort] = [
    await freePort(),
    await freePort(),
    await freePort(),
    await freePort(),
  ];
  const pair = await startPair({
    count,
    notify: 'direct',
    forwarderExtra: ['--transfer-relay-from=127.0.0.0/8'],
    recordBuilderExtra: [`--notify-node-cache=127.0.0.1:${notifyPort}`],
  });
  const dir = await mkdtemp(join(SCRATCH, 'bench-node-cache-'));
  const corefile = join(dir, 'Corefile.base');
  await writeFile(
    corefile,
    [
      `cluster.local:${cachePort} {`,
      '    cache {',
      '        success 9984 30',
      '        denial 9984 5',
      '    }',
      '    bind 127.0.0.1',
      `    forward . 127.0.0.1:${pair.fwPort} {`,
      '        force_tcp',
      '    }',
      `    prometheus 127.0.0.1:${metricsPort}`,
      '}',
      `.:${cachePort} {`,
      '    cache 30',
      '    bind 127.0.0.1',
      `    forward . ${pair.external.address.replace('#', ':')}`,
      '}',
      '',
    ].join('\n'),
  );
  const cache = await startOurs(
    'forwarder',
    [
      '-localip',
      '127.0.0.1',
      '-setupinterface=false',
      '-setupiptables=false',
      '-basecorefile',
      corefile,
      '-conf',
      '',
      '-metrics-listen-address',
      `127.0.0.1:${setupPort}`,
      '-notify-listen-address',
      `127.0.0.1:${notifyPort}`,
    ],
    SERVER_CORE,
    {},
    join(ROOT, 'packages/forwarder/dist/node-cache-main.js'),
  );
  try {
    const deadline = performance.now() + 30_000;
    const pushed = async () =>
      /^clusterdns_forwarder_zone_serial\{zone="cluster.local."\} [1-9]/m.test(
        await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text(),
      );
    while (!(await pushed())) {
      if (performance.now() > deadline) throw new Error('the node cache never got the first NOTIFY');
      await new Promise((r) => setTimeout(r, 50));
    }
    // Changes 150 ms apart: each is the first in its --notify-node-cache-interval (100 ms), so this
    // times the path. Faster ones (more than 10 a second) wait out the rest of the interval.
    for (const [kind, times] of Object.entries(await changeKinds(pair, cachePort, count, 10_000, 150)))
      row(`6. propagation through a node cache (node-local, pushed): ${kind}`, 'cluster-dns', summary(times));
  } finally {
    await cache.stop();
    await pair.stop();
  }
}
