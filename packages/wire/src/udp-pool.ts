import dgram from 'node:dgram';
import net from 'node:net';
import { checkReply, type DnsServer, type ExchangeOptions, questionKey, randomQueryId } from './client.js';
import { HEADER_BYTES } from './constants.js';
import { DnsTimeoutError, PoolClosedError } from './errors.js';
import { literalLookup } from './listener.js';

interface Pending {
  server: DnsServer;
  question: string | undefined;
  resolve: (reply: Buffer) => void;
  reject: (error: Error) => void;
  timer: NodeJS.Timeout;
  onRejected: ExchangeOptions['onRejected'];
}

interface PooledSocket {
  socket: dgram.Socket;
  pending: Map<number, Pending>;
  uses: number;
  retiring: boolean;
  closed: boolean;
}

/** Closes a retiring socket once its last query is answered or timed out. */
function closeIfDone(entry: PooledSocket): void {
  if (!entry.retiring || entry.closed || entry.pending.size > 0) return;
  entry.closed = true;
  entry.socket.close();
}

export interface UdpPoolOptions {
  /** Sockets per address family, each on its own random port. */
  size?: number;
  /** A socket is replaced by one on a new random port after this many queries. */
  rotateAfter?: number;
  /**
   * A datagram that answers no query of ours: an ID nobody waits for from an address nobody was
   * asked, or too short for a header (a spray of forged replies, or a late one).
   */
  onStray?: () => void;
}

export interface UdpPool {
  exchange(server: DnsServer, query: Buffer, options?: ExchangeOptions): Promise<Buffer>;
  close(): void;
}

/**
 * Upstream UDP queries over a pool of sockets on random ports, replaced as they are used, instead
 * of one new socket per query (which cost the forwarder most of its time per miss). Each query
 * gets a random socket and a random ID unique on it; a reply is accepted only from the server
 * asked, with that ID and question (RFC 5452), everything else is reported and dropped.
 */
export function createUdpPool(options: UdpPoolOptions = {}): UdpPool {
  const size = options.size ?? 32;
  const rotateAfter = options.rotateAfter ?? 512;
  const pools: Record<'udp4' | 'udp6', Array<PooledSocket | undefined>> = { udp4: [], udp6: [] };
  let closed = false;

  const open = (type: 'udp4' | 'udp6', index: number): PooledSocket => {
    const entry: PooledSocket = {
      socket: dgram.createSocket({ type, lookup: literalLookup(type === 'udp6' ? 6 : 4) }),
      pending: new Map(),
      uses: 0,
      retiring: false,
      closed: false,
    };
    entry.socket.on('error', () => {
      // Send errors fail the queries by their timeout; the socket is replaced on its next turn.
      entry.retiring = true;
    });
    entry.socket.on('message', (reply, rinfo) => {
      if (reply.length < HEADER_BYTES) return options.onStray?.();
      const id = reply.readUInt16BE(0);
      const pending = entry.pending.get(id);
      if (!pending) {
        // A reply with an ID we are not waiting for: late, or forged. Tell a query to that server.
        for (const p of entry.pending.values()) {
          if (p.server.host === rinfo.address && p.server.port === rinfo.port) return p.onRejected?.('id');
        }
        return options.onStray?.();
      }
      if (rinfo.address !== pending.server.host || rinfo.port !== pending.server.port)
        return pending.onRejected?.('source');
      const reason = checkReply(reply, id, pending.question);
      if (reason) return pending.onRejected?.(reason);
      entry.pending.delete(id);
      clearTimeout(pending.timer);
      pending.resolve(reply);
      closeIfDone(entry);
    });
    entry.socket.bind(0);
    pools[type][index] = entry;
    return entry;
  };

  const pick = (type: 'udp4' | 'udp6'): PooledSocket => {
    const index = randomQueryId() % size;
    let entry = pools[type][index];
    if (!entry || entry.retiring || entry.uses >= rotateAfter) {
      if (entry) {
        entry.retiring = true;
        closeIfDone(entry);
      }
      entry = open(type, index);
    }
    entry.uses++;
    return entry;
  };

  return {
    exchange(server, query, exchangeOptions = {}) {
      if (closed) return Promise.reject(new PoolClosedError());
      const timeoutMs = exchangeOptions.timeoutMs ?? 2000;
      const timeoutError = new DnsTimeoutError(`${server.host}:${server.port}`, timeoutMs);
      const entry = pick(net.isIPv6(server.host) ? 'udp6' : 'udp4');
      let id = query.readUInt16BE(0);
      while (entry.pending.has(id)) id = randomQueryId();
      query.writeUInt16BE(id, 0);
      return new Promise<Buffer>((resolve, reject) => {
        const timer = setTimeout(() => {
          entry.pending.delete(id);
          closeIfDone(entry);
          reject(timeoutError);
        }, timeoutMs);
        entry.pending.set(id, {
          server,
          question: questionKey(query),
          resolve,
          reject,
          timer,
          onRejected: exchangeOptions.onRejected,
        });
        entry.socket.send(query, server.port, server.host, (error) => {
          if (!error) return;
          entry.pending.delete(id);
          clearTimeout(timer);
          reject(error);
        });
      });
    },
    close() {
      closed = true;
      for (const list of Object.values(pools)) {
        for (const entry of list) {
          if (!entry) continue;
          for (const p of entry.pending.values()) {
            clearTimeout(p.timer);
            p.reject(new PoolClosedError());
          }
          entry.pending.clear();
          entry.retiring = true;
          closeIfDone(entry);
        }
      }
    },
  };
}
