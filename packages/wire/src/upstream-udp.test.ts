import dgram from 'node:dgram';
import { afterEach, describe, expect, it } from 'vitest';
import { Cancellation } from './cancellation.js';
import { QTYPE, RCODE } from './constants.js';
import { buildQueryMessage, decodeMessage, encodeMessage } from './message.js';
import { parseQuery } from './query.js';
import { buildBareResponse } from './response.js';
import { createUpstreamUdp } from './upstream-udp.js';

const sockets: dgram.Socket[] = [];
afterEach(() => {
  for (const s of sockets.splice(0)) s.close();
});

/** A server that answers REFUSED, remembering the source port of each query. */
async function server(forge?: 'id' | 'source') {
  const socket = dgram.createSocket('udp4');
  const forger = dgram.createSocket('udp4');
  sockets.push(socket, forger);
  const ports: number[] = [];
  socket.on('message', (msg, rinfo) => {
    ports.push(rinfo.port);
    const reply = buildBareResponse(parseQuery(msg), RCODE.REFUSED);
    if (forge === 'id') {
      const forged = Buffer.from(reply);
      forged.writeUInt16BE((forged.readUInt16BE(0) + 1) & 0xffff, 0);
      socket.send(forged, rinfo.port, rinfo.address);
    }
    // Forged first, from another port: it arrives before the real one.
    if (forge === 'source')
      forger.send(reply, rinfo.port, rinfo.address, () => socket.send(reply, rinfo.port, rinfo.address));
    else socket.send(reply, rinfo.port, rinfo.address);
  });
  await new Promise<void>((r) => socket.bind(0, '127.0.0.1', () => r()));
  // Room for every query of a burst: the kernel's default buffer holds some 200.
  socket.setRecvBufferSize(4 * 1024 * 1024);
  await new Promise<void>((r) => forger.bind(0, '127.0.0.1', () => r()));
  return { server: { host: '127.0.0.1', port: socket.address().port }, ports };
}

const query = (name: string, id = 1) => encodeMessage(buildQueryMessage(id, name, QTYPE.A));

/** A server that reads and never answers: a black hole. */
async function silent() {
  const socket = dgram.createSocket('udp4');
  sockets.push(socket);
  let seen = 0;
  socket.on('message', () => seen++);
  await new Promise<void>((r) => socket.bind(0, '127.0.0.1', () => r()));
  return { server: { host: '127.0.0.1', port: socket.address().port }, seen: () => seen };
}

describe('createUpstreamUdp', () => {
  it('gives up a query at once when it is cancelled, closing its socket, with the cancellation’s reason', async () => {
    const { server: s } = await silent();
    const udp = createUpstreamUdp();
    const asker = new Cancellation();
    const asked = udp.exchange(s, query('held.example.org'), { timeoutMs: 60_000, cancel: asker });
    expect(udp.open()).toBe(1);
    const reason = new Error('pushed out');
    asker.cancel(reason);
    await expect(asked).rejects.toBe(reason);
    expect(udp.open()).toBe(0);
    // Aborted before it was sent: no socket at all.
    await expect(udp.exchange(s, query('late.example.org'), { cancel: asker })).rejects.toBe(reason);
    expect(udp.open()).toBe(0);
  });

  it('sends each query from a port of its own, closed once answered', async () => {
    const { server: s, ports } = await server();
    const udp = createUpstreamUdp();
    const replies = await Promise.all(
      Array.from({ length: 300 }, (_, i) => udp.exchange(s, query(`n${i}.example.org`, i))),
    );
    expect(replies.map((r) => decodeMessage(r).questions[0]?.name)).toEqual(
      Array.from({ length: 300 }, (_, i) => `n${i}.example.org.`),
    );
    // 300 queries at once, 300 sockets: no two share a port. None stays open.
    expect(new Set(ports).size).toBe(300);
    expect(udp.open()).toBe(0);
    // One after another too: the kernel picks a new random port each time (a repeat is possible,
    // as for any random pick, but rare among tens of thousands).
    const serial: number[] = [];
    for (let i = 0; i < 50; i++) {
      await udp.exchange(s, query(`m${i}.example.org`, i));
      serial.push(ports.at(-1) as number);
    }
    expect(new Set(serial).size).toBeGreaterThan(45);
    udp.close();
  });

  it.each(['id', 'source'] as const)('reports a reply with the wrong %s and waits for the right one', async (forge) => {
    const { server: s } = await server(forge);
    const udp = createUpstreamUdp();
    const rejected: string[] = [];
    const reply = await udp.exchange(s, query('a.example.org'), { onRejected: (r) => rejected.push(r) });
    udp.close();
    expect(decodeMessage(reply).flags.rcode).toBe(RCODE.REFUSED);
    expect(rejected).toEqual([forge]);
  });

  it('times out naming the server, and closes the socket', async () => {
    const silent = dgram.createSocket('udp4');
    sockets.push(silent);
    await new Promise<void>((r) => silent.bind(0, '127.0.0.1', () => r()));
    const udp = createUpstreamUdp();
    await expect(
      udp.exchange({ host: '127.0.0.1', port: silent.address().port }, query('a.example.org'), { timeoutMs: 50 }),
    ).rejects.toThrow(`127.0.0.1:${silent.address().port}`);
    expect(udp.open()).toBe(0);
  });

  it('fails what is in flight on close, and refuses what comes after', async () => {
    const silent = dgram.createSocket('udp4');
    sockets.push(silent);
    await new Promise<void>((r) => silent.bind(0, '127.0.0.1', () => r()));
    const udp = createUpstreamUdp();
    const pending = udp.exchange({ host: '127.0.0.1', port: silent.address().port }, query('a.example.org'));
    expect(udp.open()).toBe(1);
    udp.close();
    await expect(pending).rejects.toThrow(/closed/);
    await expect(udp.exchange({ host: '127.0.0.1', port: 1 }, query('b.example.org'))).rejects.toThrow(/closed/);
    expect(udp.open()).toBe(0);
  });
});
