import { Buffer } from 'node:buffer';
import dgram from 'node:dgram';
import { whenCancelled } from './cancellation.js';
import type { DnsServer, ExchangeOptions } from './client.js';
import { randomQueryId } from './client.js';
import { DnsTimeoutError, PoolClosedError } from './errors.js';
import { literalLookup } from './listener.js';
import { checkReply, questionEndOf } from './reply-check.js';

/** Sockets kept per server: a few, so one slow reader does not hold every reply behind it. */
const SOCKETS_PER_SERVER = 4;

interface Waiting {
  readonly query: Buffer;
  readonly queryEnd: number;
  readonly onRejected: ExchangeOptions['onRejected'];
  settle(error: Error | undefined, reply?: Buffer): void;
}

interface Kept {
  readonly socket: dgram.Socket;
  readonly waiting: Map<number, Waiting>;
  /** IDs given up lately (a timeout, a cancellation): a reply to one is late, not forged. */
  readonly givenUp: Set<number>;
  /** Told of a reply no query waits for: the last asker's, every asker of a server being alike. */
  onRejected: ExchangeOptions['onRejected'];
  closed: boolean;
}

/** IDs remembered as given up, per socket: a late reply beyond these counts as a forgery. */
const GIVEN_UP_KEPT = 1024;

/** Whether a server is on this host's loopback, where nobody off the host can send to our ports. */
export { isLoopback } from './ip-address.js';

/**
 * Upstream UDP queries over a few kept sockets per server, each connected to it, the queries told
 * apart by ID: for servers on loopback only (the record-builder beside the forwarder in its Pod).
 * A socket of its own per query (upstream-udp.ts) is what makes a forged reply from off the host
 * need ~2^30 guesses; on loopback no one off the host can send, while creating, binding and
 * closing that socket was a third of what a miss cost, and each in-flight query's socket was an
 * event of its own in every turn of the event loop, which starved the listener under a flood.
 * Kept sockets are read 32 replies a turn, like the listener. A connected UDP socket takes replies
 * from its server only (the kernel filters the source); the ID and question are checked as ever.
 */
export function createKeptUdp() {
  const pools = new Map<string, Kept[]>();
  let next = 0;
  let closed = false;

  const open = (server: DnsServer, key: string): Kept => {
    const family = server.host.includes(':') ? 6 : 4;
    const socket = dgram.createSocket({ type: family === 6 ? 'udp6' : 'udp4', lookup: literalLookup(family) });
    const kept: Kept = { socket, waiting: new Map(), givenUp: new Set(), onRejected: undefined, closed: false };
    // A failure of the socket (a refused port reads as ECONNREFUSED) fails what waits on it; the
    // next query opens a new one.
    const fail = (error: Error) => {
      if (kept.closed) return;
      kept.closed = true;
      const pool = pools.get(key);
      if (pool)
        pools.set(
          key,
          pool.filter((k) => k !== kept),
        );
      for (const w of [...kept.waiting.values()]) w.settle(error);
      kept.waiting.clear();
      socket.close();
    };
    socket.on('error', fail);
    socket.on('message', (reply) => {
      if (reply.length < 2) return;
      const id = reply.readUInt16BE(0);
      const waiting = kept.waiting.get(id);
      // No one waits: a late reply to a query given up (dropped quietly), or a guess (counted).
      if (waiting === undefined) {
        if (!kept.givenUp.delete(id)) kept.onRejected?.('id');
        return;
      }
      const reason = checkReply(reply, waiting.query, waiting.queryEnd);
      if (reason) return waiting.onRejected?.(reason);
      waiting.settle(undefined, reply);
    });
    socket.connect(server.port, server.host);
    socket.unref();
    return kept;
  };

  const pick = (server: DnsServer): Kept => {
    const key = `${server.host}#${server.port}`;
    let pool = pools.get(key);
    if (pool === undefined) {
      pool = [];
      pools.set(key, pool);
    }
    if (pool.length < SOCKETS_PER_SERVER) {
      const kept = open(server, key);
      pool.push(kept);
      return kept;
    }
    next = (next + 1) % pool.length;
    return pool[next] as Kept;
  };

  return {
    exchange(server: DnsServer, query: Buffer, options: ExchangeOptions = {}): Promise<Buffer> {
      if (closed) return Promise.reject(new PoolClosedError());
      if (options.cancel?.reason) return Promise.reject(options.cancel.reason);
      const kept = pick(server);
      // An ID no query on this socket holds: our own copy carries it.
      let own = query;
      let id = query.readUInt16BE(0);
      if (kept.waiting.has(id)) {
        own = Buffer.from(query);
        do id = randomQueryId();
        while (kept.waiting.has(id));
        own.writeUInt16BE(id, 0);
      }
      const timeoutMs = options.timeoutMs ?? 2000;
      kept.onRejected = options.onRejected;
      return new Promise<Buffer>((resolve, reject) => {
        let timer: NodeJS.Timeout | undefined;
        let detach = () => {};
        const waiting: Waiting = {
          query: own,
          queryEnd: questionEndOf(own),
          onRejected: options.onRejected,
          settle: (error, reply) => {
            if (kept.waiting.get(id) !== waiting) return;
            kept.waiting.delete(id);
            clearTimeout(timer);
            detach();
            if (!error) return resolve(reply as Buffer);
            if (kept.givenUp.size >= GIVEN_UP_KEPT) kept.givenUp.delete(kept.givenUp.values().next().value as number);
            kept.givenUp.add(id);
            reject(error);
          },
        };
        kept.waiting.set(id, waiting);
        timer = setTimeout(
          () => waiting.settle(new DnsTimeoutError(`${server.host}:${server.port}`, timeoutMs)),
          timeoutMs,
        );
        detach = whenCancelled(options.cancel, (reason) => waiting.settle(reason));
        if (kept.waiting.get(id) === waiting) kept.socket.send(own);
      });
    },
    /** Kept sockets open now, over every server. */
    sockets(): number {
      let n = 0;
      for (const pool of pools.values()) n += pool.length;
      return n;
    },
    close(): void {
      closed = true;
      for (const pool of [...pools.values()])
        for (const kept of pool) {
          kept.closed = true;
          for (const w of [...kept.waiting.values()]) w.settle(new PoolClosedError());
          kept.socket.close();
        }
      pools.clear();
    },
  };
}

export type KeptUdp = ReturnType<typeof createKeptUdp>;
