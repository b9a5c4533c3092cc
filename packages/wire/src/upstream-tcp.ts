import { Buffer } from 'node:buffer';
import net from 'node:net';
import { type Cancellation, whenCancelled } from './cancellation.js';
import { randomQueryId } from './client.js';
import { FLAG, RCODE_MASK } from './constants.js';
import { ConnectionClosedError, DnsTimeoutError, PoolClosedError } from './errors.js';
import { checkReply, compareQuestion, questionEndOf, type RejectReason } from './reply-check.js';

export interface UpstreamTcpOptions {
  /** Close a connection with nothing in flight after this long (CoreDNS forward's `expire`: 10 s). */
  idleTimeoutMs?: number;
  /** Queries in flight on one connection before another is opened. */
  maxInFlightPerConnection?: number;
  /** Connections to one server at most; past it, queries share the least loaded. */
  maxConnectionsPerServer?: number;
  /**
   * Opens a connection: plain TCP by default; DNS over TLS (RFC 7858) gives `tls.connect`, the
   * same two-octet framing running inside it. Its 'error' is the pool's to handle.
   */
  connect?: (server: { host: string; port: number }) => net.Socket;
}

export interface UpstreamTcp {
  /** Sends one query on a kept connection to `server` and resolves with the reply to it. */
  exchange(
    server: { host: string; port: number },
    query: Buffer,
    options: { timeoutMs?: number; onRejected?: (reason: RejectReason) => void; cancel?: Cancellation },
  ): Promise<Buffer>;
  /**
   * A query answered in several messages (a zone transfer) on a kept connection: `onMessage` gets
   * each, and returns true at the last. Messages after the first may leave the question out
   * (RFC 5936 §2.2). Asked again on a new connection only if no message of it had come.
   */
  stream(
    server: { host: string; port: number },
    query: Buffer,
    options: { timeoutMs?: number; onMessage(reply: Buffer): boolean },
  ): Promise<void>;
  /** Connections open now, over every server. */
  connections(): number;
  /** Connections opened since the start: a pool that works opens few. */
  readonly opened: number;
  /** Closes every connection; what is in flight rejects. */
  close(): void;
}

interface Pending {
  readonly query: Buffer;
  readonly queryEnd: number;
  readonly resolve: (reply: Buffer) => void;
  readonly reject: (error: Error) => void;
  readonly onRejected: ((reason: RejectReason) => void) | undefined;
  timer: NodeJS.Timeout | undefined;
  /** The connection it was last sent on. */
  conn: Connection | undefined;
  retried: boolean;
  /** A stream's (a transfer's) handler of each message: true at its last. */
  readonly more: ((reply: Buffer) => boolean) | undefined;
  /** A message of the stream came: it cannot be asked again from the start. */
  received: boolean;
}

interface Connection {
  readonly socket: net.Socket;
  readonly pending: Map<number, Pending>;
  /** Set once a reply came on it: a connection that never answered is not worth a retry. */
  answered: boolean;
  closed: boolean;
  idle: NodeJS.Timeout | undefined;
}

function frame(query: Buffer): Buffer {
  const out = Buffer.allocUnsafe(query.length + 2);
  out.writeUInt16BE(query.length, 0);
  query.copy(out, 2);
  return out;
}

/**
 * TCP to upstreams on kept connections, as a node cache talks to the cluster's DNS (CoreDNS's
 * `force_tcp`): queries are pipelined on a connection and matched to replies by ID and question
 * (RFC 7766 §6.2.1.1), so one connection carries a node's whole load instead of one connection
 * per query. Each query's ID is unique among those in flight on its connection. When the server
 * closes a connection with queries unanswered (its idle timeout racing our send), each is sent
 * again once on a fresh connection, as RFC 7766 §6.2.1 asks. Connections idle for
 * `idleTimeoutMs` are closed by us, and an idle one keeps no process alive.
 */
export function createUpstreamTcp(options: UpstreamTcpOptions = {}): UpstreamTcp {
  const idleTimeoutMs = options.idleTimeoutMs ?? 10_000;
  const perConnection = options.maxInFlightPerConnection ?? 256;
  const perServer = options.maxConnectionsPerServer ?? 8;
  const pools = new Map<string, Connection[]>();
  let closed = false;
  let opened = 0;

  const drop = (key: string, conn: Connection) => {
    const pool = pools.get(key);
    if (!pool) return;
    const at = pool.indexOf(conn);
    if (at !== -1) pool.splice(at, 1);
    if (pool.length === 0) pools.delete(key);
  };

  const open = (server: { host: string; port: number }, key: string): Connection => {
    opened++;
    const socket = options.connect
      ? options.connect(server)
      : net.connect({ host: server.host, port: server.port, noDelay: true });
    const conn: Connection = { socket, pending: new Map(), answered: false, closed: false, idle: undefined };
    let buffered: Buffer = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      buffered = buffered.length ? Buffer.concat([buffered, chunk]) : chunk;
      while (buffered.length >= 2 && buffered.length >= 2 + buffered.readUInt16BE(0)) {
        const length = buffered.readUInt16BE(0);
        const reply = Buffer.from(buffered.subarray(2, 2 + length));
        buffered = buffered.subarray(2 + length);
        if (reply.length < 2) continue;
        const p = conn.pending.get(reply.readUInt16BE(0));
        // A reply to no query of ours (one that timed out, or a forgery): dropped.
        if (!p) continue;
        if (p.more) {
          streamed(conn, reply, p);
          continue;
        }
        const reason = checkReply(reply, p.query, p.queryEnd);
        if (reason) {
          p.onRejected?.(reason);
          continue;
        }
        conn.answered = true;
        settle(conn, reply.readUInt16BE(0), p);
        p.resolve(reply);
      }
    });
    const gone = (error?: Error) => {
      if (conn.closed) return;
      conn.closed = true;
      clearTimeout(conn.idle);
      drop(key, conn);
      socket.destroy();
      const unanswered = [...conn.pending.values()];
      conn.pending.clear();
      for (const p of unanswered) {
        // Closed under a query: ask once more on a new connection, unless this one never worked.
        if (!p.retried && !p.received && conn.answered && !closed) {
          p.retried = true;
          send(server, key, p);
        } else {
          clearTimeout(p.timer);
          p.reject(error ?? new ConnectionClosedError(`${server.host}:${server.port}`));
        }
      }
    };
    socket.on('error', (error) => gone(error));
    socket.on('close', () => gone());
    const pool = pools.get(key) ?? [];
    pool.push(conn);
    pools.set(key, pool);
    return conn;
  };

  /** One message of a stream (a transfer) on `conn`. */
  const streamed = (conn: Connection, reply: Buffer, p: Pending) => {
    const flags = reply.readUInt16BE(2);
    if ((flags & FLAG.QR) === 0) return p.onRejected?.('not-a-response');
    if (
      reply.readUInt16BE(4) > 0 &&
      (flags & RCODE_MASK) === 0 &&
      compareQuestion(reply, p.query, p.queryEnd) === 'other'
    )
      return p.onRejected?.('question');
    conn.answered = true;
    p.received = true;
    let done: boolean;
    try {
      done = (p.more as (reply: Buffer) => boolean)(reply);
    } catch (error) {
      settle(conn, reply.readUInt16BE(0), p);
      p.reject(error as Error);
      return;
    }
    if (done) {
      settle(conn, reply.readUInt16BE(0), p);
      p.resolve(reply);
    }
  };

  /** Done with one query on `conn`: an empty connection starts its idle timer and stops holding the process. */
  const settle = (conn: Connection, id: number, p: Pending) => {
    clearTimeout(p.timer);
    conn.pending.delete(id);
    if (conn.pending.size === 0 && !conn.closed) {
      conn.socket.unref();
      clearTimeout(conn.idle);
      conn.idle = setTimeout(() => conn.socket.end(), idleTimeoutMs);
      conn.idle.unref();
    }
  };

  const pick = (server: { host: string; port: number }, key: string): Connection => {
    const pool = pools.get(key) ?? [];
    let best: Connection | undefined;
    for (const c of pool) if (!c.closed && (!best || c.pending.size < best.pending.size)) best = c;
    if (best && (best.pending.size < perConnection || pool.length >= perServer)) return best;
    return open(server, key);
  };

  const send = (server: { host: string; port: number }, key: string, p: Pending) => {
    const conn = pick(server, key);
    let id = p.query.readUInt16BE(0);
    while (conn.pending.has(id)) id = randomQueryId();
    p.query.writeUInt16BE(id, 0);
    clearTimeout(conn.idle);
    conn.idle = undefined;
    conn.socket.ref();
    conn.pending.set(id, p);
    p.conn = conn;
    conn.socket.write(frame(p.query));
  };

  /** One query on a kept connection: its reply, or (a stream) its last message. */
  const ask = (
    server: { host: string; port: number },
    query: Buffer,
    timeoutMs: number,
    onRejected: ((reason: RejectReason) => void) | undefined,
    more: ((reply: Buffer) => boolean) | undefined,
    cancel?: Cancellation,
  ): Promise<Buffer> => {
    if (closed) return Promise.reject(new PoolClosedError());
    const key = `${server.host}#${server.port}`;
    // Our own copy: its ID may be changed to one free on the connection.
    const own = Buffer.from(query);
    return new Promise<Buffer>((resolve, reject) => {
      let detach = () => {};
      const p: Pending = {
        query: own,
        queryEnd: questionEndOf(own),
        resolve: (reply) => {
          detach();
          resolve(reply);
        },
        reject: (error) => {
          detach();
          reject(error);
        },
        onRejected,
        timer: undefined,
        conn: undefined,
        retried: false,
        more,
        received: false,
      };
      // Given up (the deadline, or the asker's cancellation): its slot on the connection is freed, and a
      // late reply is dropped.
      const giveUp = (error: Error) => {
        const id = own.readUInt16BE(0);
        if (p.conn?.pending.get(id) === p) settle(p.conn, id, p);
        else clearTimeout(p.timer);
        p.reject(error);
      };
      // One deadline for the query, a retry on a new connection included.
      p.timer = setTimeout(
        () => giveUp(new DnsTimeoutError(`${server.host}:${server.port}/tcp`, timeoutMs)),
        timeoutMs,
      );
      detach = whenCancelled(cancel, giveUp);
      if (cancel?.cancelled) return;
      send(server, key, p);
    });
  };

  return {
    get opened() {
      return opened;
    },
    connections: () => {
      let n = 0;
      for (const pool of pools.values()) n += pool.length;
      return n;
    },
    exchange(server, query, exchangeOptions) {
      return ask(
        server,
        query,
        exchangeOptions.timeoutMs ?? 2000,
        exchangeOptions.onRejected,
        undefined,
        exchangeOptions.cancel,
      );
    },
    async stream(server, query, streamOptions) {
      await ask(server, query, streamOptions.timeoutMs ?? 5000, undefined, streamOptions.onMessage);
    },
    close() {
      closed = true;
      for (const pool of [...pools.values()]) for (const conn of [...pool]) conn.socket.destroy(new PoolClosedError());
      pools.clear();
    },
  };
}
