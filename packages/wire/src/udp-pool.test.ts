import dgram from 'node:dgram';
import { afterEach, describe, expect, it } from 'vitest';
import { QTYPE, RCODE } from './constants.js';
import { buildQueryMessage, decodeMessage, encodeMessage } from './message.js';
import { parseQuery } from './query.js';
import { buildBareResponse } from './response.js';
import { createUdpPool } from './udp-pool.js';

const sockets: dgram.Socket[] = [];
afterEach(() => {
  for (const s of sockets.splice(0)) s.close();
});

/** A server that answers REFUSED, remembering which source ports it saw. */
async function echoServer(forge?: 'id') {
  const socket = dgram.createSocket('udp4');
  sockets.push(socket);
  const ports = new Set<number>();
  socket.on('message', (msg, rinfo) => {
    ports.add(rinfo.port);
    const reply = buildBareResponse(parseQuery(msg), RCODE.REFUSED);
    if (forge === 'id') {
      const forged = Buffer.from(reply);
      forged.writeUInt16BE((forged.readUInt16BE(0) + 1) & 0xffff, 0);
      socket.send(forged, rinfo.port, rinfo.address);
    }
    setTimeout(() => socket.send(reply, rinfo.port, rinfo.address), 5);
  });
  await new Promise<void>((r) => socket.bind(0, '127.0.0.1', () => r()));
  return { server: { host: '127.0.0.1', port: socket.address().port }, ports };
}

const query = (name: string) => encodeMessage(buildQueryMessage(1, name, QTYPE.A));

describe('createUdpPool', () => {
  it('answers many concurrent queries from a few random ports, rotating them', async () => {
    const { server, ports } = await echoServer();
    const pool = createUdpPool({ size: 4, rotateAfter: 10 });
    const replies = await Promise.all(
      Array.from({ length: 200 }, (_, i) => pool.exchange(server, query(`n${i}.example.org`))),
    );
    pool.close();
    expect(replies.every((r) => decodeMessage(r).flags.rcode === RCODE.REFUSED)).toBe(true);
    expect(replies.map((r) => decodeMessage(r).questions[0]?.name)).toEqual(
      Array.from({ length: 200 }, (_, i) => `n${i}.example.org.`),
    );
    // 200 queries, rotation after 10 each: many more ports than the 4 sockets held at once.
    expect(ports.size).toBeGreaterThan(10);
  });

  it('reports a reply with the wrong ID and keeps waiting for the right one', async () => {
    const { server } = await echoServer('id');
    const pool = createUdpPool();
    const rejected: string[] = [];
    const reply = await pool.exchange(server, query('a.example.org'), { onRejected: (r) => rejected.push(r) });
    pool.close();
    expect(decodeMessage(reply).flags.rcode).toBe(RCODE.REFUSED);
    expect(rejected).toEqual(['id']);
  });

  it('times out naming the server', async () => {
    const silent = dgram.createSocket('udp4');
    sockets.push(silent);
    await new Promise<void>((r) => silent.bind(0, '127.0.0.1', () => r()));
    const pool = createUdpPool();
    await expect(
      pool.exchange({ host: '127.0.0.1', port: silent.address().port }, query('a.example.org'), { timeoutMs: 50 }),
    ).rejects.toThrow(`127.0.0.1:${silent.address().port}`);
    pool.close();
  });
});
