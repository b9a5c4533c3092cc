import type { Buffer } from 'node:buffer';
import dgram from 'node:dgram';
import type { DnsServer } from './client.js';
import { DnsTimeoutError } from './errors.js';
import { literalLookup } from './listener.js';
import { checkReply, questionEndOf } from './reply-check.js';

/** Exchanges with many servers at once over one socket per address family (udp-fanout.ts). */
export interface UdpFanout {
  exchange(server: DnsServer, message: Buffer, timeoutMs: number): Promise<Buffer>;
  /** Exchanges waiting for a reply. */
  readonly pending: number;
  close(): void;
}

interface Waiting {
  readonly message: Buffer;
  readonly queryEnd: number;
  readonly timer: NodeJS.Timeout;
  settle(error: Error | undefined, reply?: Buffer): void;
}

/** Sockets per family: libuv reads 32 datagrams a socket per loop turn, each socket has its buffer. */
const SOCKETS = 8;
/** Asked of each socket's receive buffer; the kernel caps it at net.core.rmem_max. */
const RECEIVE_BUFFER_BYTES = 1 << 20;

/**
 * A few unconnected UDP sockets per family for messages to many servers, each reply matched by its
 * source, ID and question: the record-builder's NOTIFYs to a thousand node caches. A socket per
 * exchange (client.ts) cost a socket's creation, connect and close per NOTIFY, more than the NOTIFY
 * itself, and a thousand open sockets each an event in every loop turn. One socket was too few: a
 * thousand answers at once overflowed its receive buffer (208 KiB by default, a few hundred small
 * datagrams) while libuv read 32 of them a loop turn, and every one lost cost a timeout and a
 * retry. The price: a few source ports, so a forged reply needs the ID (2^16) and one of
 * them. A forged answer to a NOTIFY only stops its retries; the next change or the heartbeat sends
 * it again. And no ECONNREFUSED (an unconnected socket is not told): a server not yet listening
 * times out.
 */
export function createUdpFanout(): UdpFanout {
  const sockets = new Map<4 | 6, dgram.Socket[]>();
  let turn = 0;
  const waiting = new Map<string, Waiting>();
  const keyOf = (host: string, port: number, id: number) => `${host}#${port}#${id}`;
  let closed = false;

  const socketFor = (family: 4 | 6): dgram.Socket => {
    let pool = sockets.get(family);
    if (!pool) {
      pool = [];
      sockets.set(family, pool);
    }
    turn = (turn + 1) % SOCKETS;
    const kept = pool[turn];
    if (kept) return kept;
    const socket = dgram.createSocket({ type: family === 6 ? 'udp6' : 'udp4', lookup: literalLookup(family) });
    socket.once('listening', () => {
      try {
        socket.setRecvBufferSize(RECEIVE_BUFFER_BYTES);
      } catch {
        // Not allowed here: the default buffer, and the answers it drops are retried.
      }
    });
    socket.on('message', (reply, rinfo) => {
      if (reply.length < 2) return;
      const host = rinfo.address.startsWith('::ffff:') && family === 4 ? rinfo.address.slice(7) : rinfo.address;
      const key = keyOf(host, rinfo.port, reply.readUInt16BE(0));
      const w = waiting.get(key);
      if (!w || checkReply(reply, w.message, w.queryEnd)) return;
      waiting.delete(key);
      w.settle(undefined, reply);
    });
    // A send error of one datagram comes to its callback; the socket itself goes on.
    socket.on('error', () => {});
    socket.unref();
    pool[turn] = socket;
    return socket;
  };

  return {
    exchange(server, message, timeoutMs) {
      if (closed) return Promise.reject(new Error('the NOTIFY socket is closed'));
      const key = keyOf(server.host, server.port, message.readUInt16BE(0));
      // Two at once to one server with one ID: the older is given up (ids are random; rare).
      waiting.get(key)?.settle(new Error('superseded by another message with the same ID'));
      return new Promise<Buffer>((resolve, reject) => {
        const timer = setTimeout(() => {
          if (waiting.get(key) === w) waiting.delete(key);
          reject(new DnsTimeoutError(`${server.host}:${server.port}`, timeoutMs));
        }, timeoutMs);
        const w: Waiting = {
          message,
          queryEnd: questionEndOf(message),
          timer,
          settle: (error, reply) => {
            clearTimeout(timer);
            if (waiting.get(key) === w) waiting.delete(key);
            if (error) reject(error);
            else resolve(reply as Buffer);
          },
        };
        waiting.set(key, w);
        socketFor(server.host.includes(':') ? 6 : 4).send(message, server.port, server.host, (error) => {
          if (error) w.settle(error);
        });
      });
    },
    get pending() {
      return waiting.size;
    },
    close() {
      closed = true;
      for (const w of [...waiting.values()]) w.settle(new Error('the NOTIFY socket is closed'));
      for (const pool of sockets.values()) for (const socket of pool) socket?.close();
      sockets.clear();
    },
  };
}
