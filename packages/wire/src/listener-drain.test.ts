import dgram from 'node:dgram';
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { QTYPE, RCODE } from './constants.js';
import { listenDns } from './listener.js';
import { buildQueryMessage, encodeMessage } from './message.js';
import { parseQuery } from './query.js';
import { buildBareResponse } from './response.js';

const query = (id: number) => encodeMessage(buildQueryMessage(id, 'slow.example.org.', QTYPE.A));
const frame = (msg: Buffer) => Buffer.concat([Buffer.from([msg.length >> 8, msg.length & 0xff]), msg]);

/** A server whose every answer takes `delayMs`: the queries a shutdown finds in flight. */
async function slowServer(delayMs: number) {
  let started = 0;
  const listener = await listenDns({
    host: '127.0.0.1',
    port: 0,
    handler: async (raw) => {
      started++;
      await new Promise((r) => setTimeout(r, delayMs));
      return buildBareResponse(parseQuery(raw), RCODE.NOERROR);
    },
  });
  return { listener, started: () => started };
}

/** Collects the IDs of every reply on a UDP socket. */
function udpClient() {
  const socket = dgram.createSocket('udp4');
  const ids: number[] = [];
  socket.on('message', (msg) => ids.push(msg.readUInt16BE(0)));
  return { socket, ids, send: (port: number, id: number) => socket.send(query(id), port, '127.0.0.1') };
}

/** A TCP client that collects reply IDs and notices our FIN. */
function tcpClient(port: number) {
  const socket = net.connect(port, '127.0.0.1');
  const ids: number[] = [];
  let buffered = Buffer.alloc(0);
  const ended = new Promise<void>((resolve) => socket.on('end', () => resolve()));
  socket.on('data', (chunk) => {
    buffered = Buffer.concat([buffered, chunk]);
    while (buffered.length >= 2 && buffered.length >= 2 + buffered.readUInt16BE(0)) {
      ids.push(buffered.readUInt16BE(2));
      buffered = buffered.subarray(2 + buffered.readUInt16BE(0));
    }
  });
  const connected = new Promise<void>((resolve) => socket.on('connect', () => resolve()));
  return { socket, ids, ended, connected };
}

const until = async (check: () => boolean, what: string) => {
  const error = new Error(`timed out waiting for ${what}`);
  for (let i = 0; i < 200; i++) {
    if (check()) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw error;
};

describe('listenDns close() drains', () => {
  it('answers every UDP and pipelined TCP query in flight, then closes', async () => {
    const { listener, started } = await slowServer(300);
    const udp = udpClient();
    for (let id = 1; id <= 20; id++) udp.send(listener.port, id);
    const tcp = tcpClient(listener.port);
    await tcp.connected;
    tcp.socket.write(Buffer.concat([21, 22, 23, 24, 25].map((id) => frame(query(id)))));
    await until(() => started() === 25, 'all 25 queries to reach the handler');
    expect(listener.inFlight()).toBe(25);

    await listener.close({ deadlineMs: 5000 });
    await until(() => udp.ids.length === 20, 'the 20 UDP replies');
    expect(udp.ids.sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    await tcp.ended;
    expect(tcp.ids).toEqual([21, 22, 23, 24, 25]);
    udp.socket.close();
    // Closed: the port takes no more connections.
    await expect(
      new Promise((resolve, reject) =>
        net.connect(listener.port, '127.0.0.1').on('connect', resolve).on('error', reject),
      ),
    ).rejects.toMatchObject({ code: 'ECONNREFUSED' });
  });

  it('reads nothing new once draining, and gives up on stragglers at the deadline', async () => {
    const { listener, started } = await slowServer(2000);
    const udp = udpClient();
    udp.send(listener.port, 1);
    await until(() => started() === 1, 'the first query to arrive');
    const closed = listener.close({ deadlineMs: 200 });
    udp.send(listener.port, 2);
    const t0 = Date.now();
    await closed;
    expect(Date.now() - t0).toBeLessThan(1500);
    expect(started()).toBe(1);
    udp.socket.close();
  });

  it('answers a client that half-closes after its queries, then ends the connection', async () => {
    const { listener } = await slowServer(50);
    const tcp = tcpClient(listener.port);
    await tcp.connected;
    tcp.socket.end(Buffer.concat([7, 8, 9].map((id) => frame(query(id)))));
    await tcp.ended;
    expect(tcp.ids).toEqual([7, 8, 9]);
    await listener.close();
  });
});
