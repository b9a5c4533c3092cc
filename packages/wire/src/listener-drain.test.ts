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

/** Resolves `reached` once `bump()` has been called `n` times: an event counted, not a time waited. */
function countdown(n: number) {
  let seen = 0;
  let done: () => void = () => {};
  const reached = new Promise<void>((resolve) => {
    done = resolve;
  });
  return {
    reached,
    bump: () => {
      if (++seen >= n) done();
    },
    seen: () => seen,
  };
}

/**
 * A server whose answers wait until the test opens its gate: the queries a shutdown finds in
 * flight, held for as long as the test needs, whatever the machine's speed.
 */
async function gatedServer(expected: number) {
  const arrived = countdown(expected);
  let open: () => void = () => {};
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  const listener = await listenDns({
    host: '127.0.0.1',
    port: 0,
    handler: async (raw) => {
      arrived.bump();
      await opened;
      return buildBareResponse(parseQuery(raw), RCODE.NOERROR);
    },
  });
  return { listener, started: arrived.seen, allArrived: arrived.reached, open };
}

/** Collects the IDs of every reply on a UDP socket; `all` resolves once `expected` have come. */
function udpClient(expected = 0) {
  const socket = dgram.createSocket('udp4');
  const ids: number[] = [];
  const replies = countdown(expected);
  socket.on('message', (msg) => {
    ids.push(msg.readUInt16BE(0));
    replies.bump();
  });
  return {
    socket,
    ids,
    all: replies.reached,
    send: (port: number, id: number) => socket.send(query(id), port, '127.0.0.1'),
  };
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

describe('listenDns close() drains', () => {
  it('answers every UDP and pipelined TCP query in flight, then closes', async () => {
    const { listener, allArrived, open } = await gatedServer(25);
    const udp = udpClient(20);
    for (let id = 1; id <= 20; id++) udp.send(listener.port, id);
    const tcp = tcpClient(listener.port);
    await tcp.connected;
    tcp.socket.write(Buffer.concat([21, 22, 23, 24, 25].map((id) => frame(query(id)))));
    await allArrived;
    expect(listener.inFlight()).toBe(25);

    // Closing starts while all 25 are held; they are answered once released, before the sockets
    // close (a listener that closed first would never send the UDP replies).
    const closed = listener.close({ deadlineMs: 30_000 });
    open();
    await closed;
    await udp.all;
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
    const { listener, started, allArrived, open } = await gatedServer(1);
    const udp = udpClient();
    udp.send(listener.port, 1);
    await allArrived;
    const closed = listener.close({ deadlineMs: 200 });
    udp.send(listener.port, 2);
    // The straggler is never released before the close: only the deadline can end it.
    await closed;
    expect(started()).toBe(1);
    open();
    udp.socket.close();
  });

  it('answers a client that half-closes after its queries, then ends the connection', async () => {
    const { listener, allArrived, open } = await gatedServer(3);
    const tcp = tcpClient(listener.port);
    await tcp.connected;
    tcp.socket.end(Buffer.concat([7, 8, 9].map((id) => frame(query(id)))));
    // Answered only after the client has half-closed.
    await allArrived;
    open();
    await tcp.ended;
    expect(tcp.ids).toEqual([7, 8, 9]);
    await listener.close();
  });
});
