import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { launchProcess, startTestUpstream } from '@cluster-dns/testkit';
import { buildQueryMessage, decodeMessage, encodeMessage } from '@cluster-dns/wire';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// Node caches (NodeLocal DNSCache forwards the cluster zones with force_tcp) keep their TCP
// connections to the Pod's forwarder open, one or a few per node: a replica serving thousands of
// nodes holds thousands of them. With the forwarder's default flags, 2,000 connections from 25
// client addresses (the nodes: 80 each, under the per-client cap) are all accepted, held and
// answered, one query then three pipelined, none closed by us, and the metrics count them.
const root = fileURLToPath(new URL('..', import.meta.url));
const CONNECTIONS = 2000;
const CLIENTS = 25;

const upstream = await startTestUpstream({
  records: { 'svc.cluster.local.': [{ type: 1, address: '10.96.0.20' }] },
});
let forwarder: Awaited<ReturnType<typeof launchProcess>>;

beforeAll(async () => {
  forwarder = await launchProcess({
    script: `${root}/packages/forwarder/dist/main.js`,
    // The TCP flags left at their defaults: those are what is tested.
    args: [
      '-k',
      '--no-resolv',
      '--listen-address=127.0.0.1',
      '--port=0',
      '--metrics-address=127.0.0.1',
      '--metrics-port=0',
      '--lameduck=0s',
      `--server=127.0.0.1#${upstream.port}`,
    ],
  });
});
afterAll(async () => {
  await forwarder?.stop();
  await upstream.close();
});

/** A connection from `localAddress` that answers each framed query in turn, and tells when we were closed. */
async function connectFrom(port: number, localAddress: string) {
  const socket = net.connect({ port, host: '127.0.0.1', localAddress });
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', () => resolve());
    socket.once('error', reject);
  });
  let closedByServer = false;
  socket.on('end', () => {
    closedByServer = true;
  });
  socket.on('error', () => {
    closedByServer = true;
  });
  let buffered = Buffer.alloc(0);
  // Replies by ID: pipelined answers come in the order they are ready (RFC 7766 §6.2.1.1).
  const waiting = new Map<number, (reply: Buffer | Error) => void>();
  socket.on('close', () => {
    for (const settle of waiting.values()) settle(new Error(`connection from ${localAddress} closed unanswered`));
    waiting.clear();
  });
  socket.on('data', (chunk: Buffer) => {
    buffered = Buffer.concat([buffered, chunk]);
    while (buffered.length >= 2 && buffered.length >= 2 + buffered.readUInt16BE(0)) {
      const reply = buffered.subarray(2, 2 + buffered.readUInt16BE(0));
      buffered = buffered.subarray(2 + reply.length);
      waiting.get(reply.readUInt16BE(0))?.(reply);
      waiting.delete(reply.readUInt16BE(0));
    }
  });
  return {
    ask(id: number): Promise<Buffer> {
      const query = encodeMessage(buildQueryMessage(id, 'svc.cluster.local', 1));
      const framed = Buffer.concat([Buffer.from([query.length >> 8, query.length & 0xff]), query]);
      return new Promise((resolve, reject) => {
        if (socket.destroyed) return reject(new Error(`connection from ${localAddress} closed`));
        waiting.set(id, (reply) => (reply instanceof Error ? reject(reply) : resolve(reply)));
        socket.write(framed);
      });
    },
    closedByServer: () => closedByServer,
    destroy: () => socket.destroy(),
  };
}

async function scrape(name: string): Promise<string[]> {
  const text = await (await fetch(`http://127.0.0.1:${forwarder.ready.metricsPort}/metrics`)).text();
  return text.split('\n').filter((line) => line.startsWith(name));
}

describe('the forwarder holding node caches’ TCP connections', () => {
  it(`accepts, holds and answers (pipelined too) ${CONNECTIONS} connections from ${CLIENTS} nodes with its default flags`, async () => {
    const port = Number(forwarder.ready.port);
    const connections: Array<Awaited<ReturnType<typeof connectFrom>>> = [];
    try {
      for (let i = 0; i < CONNECTIONS; i++) connections.push(await connectFrom(port, `127.0.${10 + (i % CLIENTS)}.1`));
      const first = await Promise.all(connections.map((c, i) => c.ask(i)));
      for (const [i, reply] of first.entries()) {
        const message = decodeMessage(reply);
        expect(message.id).toBe(i);
        expect(message.answers.map((a) => ('address' in a ? a.address : undefined))).toEqual(['10.96.0.20']);
      }
      expect(await scrape('clusterdns_forwarder_tcp_connections ')).toEqual([
        `clusterdns_forwarder_tcp_connections ${CONNECTIONS}`,
      ]);
      // Every connection is still ours to use: each pipelines three more on it, all answered, and
      // nothing was closed.
      const ids = connections.map((_, i) => [1, 2, 3].map((k) => k * CONNECTIONS + i));
      const second = await Promise.all(connections.map((c, i) => Promise.all((ids[i] ?? []).map((id) => c.ask(id)))));
      expect(second.map((replies) => replies.map((reply) => decodeMessage(reply).id))).toEqual(ids);
      expect(connections.filter((c) => c.closedByServer())).toHaveLength(0);
      expect(await scrape('clusterdns_forwarder_tcp_connections_refused_total')).toEqual([
        'clusterdns_forwarder_tcp_connections_refused_total{reason="limit"} 0',
        'clusterdns_forwarder_tcp_connections_refused_total{reason="per_client"} 0',
      ]);
    } finally {
      for (const c of connections) c.destroy();
    }
  }, 120_000);
});
