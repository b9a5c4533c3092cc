import dgram from 'node:dgram';
import { afterEach, describe, expect, it } from 'vitest';
import { Cancellation } from './cancellation.js';
import { QTYPE, RCODE } from './constants.js';
import { buildQueryMessage, decodeMessage, encodeMessage } from './message.js';
import { parseQuery } from './query.js';
import { buildBareResponse } from './response.js';
import { createUpstreamUdp } from './upstream-udp.js';
import { createKeptUdp, isLoopback } from './upstream-udp-kept.js';

const sockets: dgram.Socket[] = [];
const pools: Array<{ close(): void }> = [];
afterEach(() => {
  for (const p of pools.splice(0)) p.close();
  for (const s of sockets.splice(0)) s.close();
});

/** A loopback server: holds each query until the test answers it, noting each source port. */
async function server() {
  const socket = dgram.createSocket('udp4');
  sockets.push(socket);
  const held: Array<{ msg: Buffer; port: number }> = [];
  socket.on('message', (msg, rinfo) => held.push({ msg, port: rinfo.port }));
  await new Promise<void>((r) => socket.bind(0, '127.0.0.1', () => r()));
  const answer = (i: number, patch?: (reply: Buffer) => void) => {
    const q = held[i] as { msg: Buffer; port: number };
    const reply = buildBareResponse(parseQuery(q.msg), RCODE.NXDOMAIN);
    patch?.(reply);
    socket.send(reply, q.port, '127.0.0.1');
  };
  return { at: { host: '127.0.0.1', port: socket.address().port }, held, answer, socket };
}

const query = (name: string, id = 1) => encodeMessage(buildQueryMessage(id, name, QTYPE.A));
async function until(check: () => boolean) {
  while (!check()) await new Promise((r) => setImmediate(r));
}

describe('kept UDP sockets for loopback upstreams', () => {
  it('asks many queries over at most four sockets, IDs kept apart, replies matched out of order', async () => {
    const s = await server();
    const kept = createKeptUdp();
    pools.push(kept);
    // Twenty queries, all with the same ID: each socket must carry distinct ones.
    const asked = Array.from({ length: 20 }, (_, i) => kept.exchange(s.at, query(`n${i}.example.org`, 7)));
    await until(() => s.held.length === 20);
    expect(new Set(s.held.map((h) => h.port)).size).toBe(4);
    expect(kept.sockets()).toBe(4);
    for (const port of new Set(s.held.map((h) => h.port))) {
      const ids = s.held.filter((h) => h.port === port).map((h) => h.msg.readUInt16BE(0));
      expect(new Set(ids).size).toBe(ids.length);
    }
    for (let i = 19; i >= 0; i--) s.answer(i);
    const replies = await Promise.all(asked);
    expect(replies.map((r) => decodeMessage(r).questions[0]?.name)).toEqual(
      Array.from({ length: 20 }, (_, i) => `n${i}.example.org.`),
    );
  });

  it('drops a reply to another question or with an ID no query holds, tells why, and keeps waiting', async () => {
    const s = await server();
    const kept = createKeptUdp();
    pools.push(kept);
    const reasons: string[] = [];
    const asked = kept.exchange(s.at, query('asked.example.org', 5), { onRejected: (r) => reasons.push(r) });
    await until(() => s.held.length === 1);
    // Same ID, another name: a forgery that guessed the ID.
    const other = buildBareResponse(
      parseQuery(query('other.example.org', s.held[0]?.msg.readUInt16BE(0))),
      RCODE.NOERROR,
    );
    s.socket.send(other, s.held[0]?.port as number, '127.0.0.1');
    s.answer(0, (r) => r.writeUInt16BE((r.readUInt16BE(0) + 1) & 0xffff, 0));
    s.answer(0);
    expect(decodeMessage(await asked).flags.rcode).toBe(RCODE.NXDOMAIN);
    expect(reasons).toEqual(['question', 'id']);
    // A late reply to a query given up is not a forgery: dropped without a word.
    const late = kept.exchange(s.at, query('late.example.org', 9), {
      timeoutMs: 20,
      onRejected: (r) => reasons.push(r),
    });
    await expect(late).rejects.toThrow(/20/);
    s.answer(1);
    // A barrier: a query asked and answered after the late reply was sent.
    const after = kept.exchange(s.at, query('after.example.org', 10));
    await until(() => s.held.length === 3);
    s.answer(2);
    await after;
    expect(reasons).toEqual(['question', 'id']);
  });

  it('gives up at the timeout or when cancelled, freeing the ID, and fails fast when the port is closed', async () => {
    const s = await server();
    const kept = createKeptUdp();
    pools.push(kept);
    await expect(kept.exchange(s.at, query('slow.example.org'), { timeoutMs: 50 })).rejects.toThrow(/50/);
    const asker = new Cancellation();
    const held = kept.exchange(s.at, query('held.example.org'), { timeoutMs: 60_000, cancel: asker });
    const reason = new Error('pushed out');
    asker.cancel(reason);
    await expect(held).rejects.toBe(reason);
    s.socket.close();
    sockets.splice(sockets.indexOf(s.socket), 1);
    // Connected sockets hear the port is closed (ICMP): no wait for the timeout.
    const started = performance.now();
    await expect(kept.exchange(s.at, query('gone.example.org'), { timeoutMs: 30_000 })).rejects.toThrow();
    expect(performance.now() - started).toBeLessThan(10_000);
  });

  it('is what createUpstreamUdp uses for loopback servers with keepLoopback, and only then', async () => {
    expect([isLoopback('127.0.0.1'), isLoopback('127.9.9.9'), isLoopback('::1'), isLoopback('10.0.0.1')]).toEqual([
      true,
      true,
      true,
      false,
    ]);
    const s = await server();
    const keeping = createUpstreamUdp({ keepLoopback: true });
    const fresh = createUpstreamUdp();
    pools.push(keeping, fresh);
    const asked = [
      ...Array.from({ length: 8 }, (_, i) => keeping.exchange(s.at, query(`k${i}.example.org`, i))),
      ...Array.from({ length: 8 }, (_, i) => fresh.exchange(s.at, query(`f${i}.example.org`, i))),
    ];
    await until(() => s.held.length === 16);
    const portsOf = (prefix: string) =>
      new Set(s.held.filter((h) => parseQuery(h.msg).qname.startsWith(prefix)).map((h) => h.port)).size;
    expect([portsOf('k'), portsOf('f')]).toEqual([4, 8]);
    for (let i = 0; i < 16; i++) s.answer(i);
    await Promise.all(asked);
  });
});
