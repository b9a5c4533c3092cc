import { Buffer } from 'node:buffer';
import dgram from 'node:dgram';
import net from 'node:net';
import { performance } from 'node:perf_hooks';
import type { Door, ExpressLane, QueryContext, RawHandler, Reply } from './dns-handler.js';
import { DnsBindError } from './errors.js';
import { serveTcpConnection, type TcpConnection } from './tcp-connection.js';
import { UdpBacklog } from './udp-backlog.js';
import { udpQueueReader } from './udp-queue.js';

export type { Door, ExpressLane, QueryContext, RawHandler, Reply } from './dns-handler.js';

export interface ListenDnsOptions {
  host: string;
  /** 0 picks a free port, the same for UDP and TCP. */
  port: number;
  /** The flags that set host and port, named in a bind failure ("--dns-bind-address, --dns-port"). */
  flags?: string;
  handler: RawHandler;
  /**
   * Tried first for every UDP query (dns-handler.ts): what it answers is sent at once, with no
   * context object, pipeline or chain around it. The forwarder's cache hits take it.
   */
  express?: ExpressLane;
  /** Decides, before the express lane and the handler, whether each client may be served (and filters UDP replies). */
  door?: Door;
  /**
   * Drop UDP queries unread once the queue waiting in the kernel would take this long to drain,
   * until it empties (udp-backlog.ts); 0 or unset: never.
   */
  shedAfterMs?: number;
  /** Called when the handler throws or a send fails; the packet is then dropped. */
  onHandlerError?: (error: unknown, context: QueryContext) => void;
  /** RFC 7766 §6.2.3: close a TCP connection idle this long. */
  tcpIdleTimeoutMs?: number;
  /** New TCP connections past this many are closed at once. */
  maxTcpConnections?: number;
  /** New TCP connections from one client address past this many are closed at once (default: no own cap). */
  maxTcpConnectionsPerClient?: number;
  /** Pause reading a TCP connection while this many of its queries are unanswered. */
  maxTcpPipelined?: number;
  /** Pause reading a TCP connection while this many octets of its replies wait for the client to read them. */
  maxTcpUnsentBytes?: number;
  /**
   * Octets of replies waiting in every TCP connection together, at most: past it, a connection
   * with any unsent reads no more, and those whose clients read nothing are closed, largest first.
   */
  maxTcpUnsentTotalBytes?: number;
  /** Close a TCP connection whose unsent replies the client has not read for this long. */
  tcpWriteTimeoutMs?: number;
  /**
   * SO_RCVBUF asked for the UDP socket (the kernel caps it at net.core.rmem_max). Queries that
   * arrive while the event loop is busy wait here; the Linux default (208 KiB, ~200 queries) holds
   * 40 ms at 5k QPS, so a longer pause drops queries before any code sees them.
   */
  udpReceiveBufferBytes?: number;
  /**
   * Bind with SO_REUSEPORT (Node 22.12+): another process (a new instance taking over) can bind
   * the same address and port while this one still serves, and the kernel spreads clients over
   * both. Without it, a second bind fails with EADDRINUSE.
   */
  reusePort?: boolean;
}

/** Whether this Node can bind with SO_REUSEPORT (`reusePort`: 22.12+ and 23.1+). */
export function reusePortSupported(version = process.versions.node): boolean {
  const [major = 0, minor = 0] = version.split('.').map(Number);
  return major > 23 || (major === 23 && minor >= 1) || (major === 22 && minor >= 12);
}

/**
 * Whether some process serves UDP on host:port: a plain bind there fails. Node-local mode asks
 * this before tearing down, so an instance that hands over to a newer one leaves its rules.
 */
export function udpPortInUse(host: string, port: number): Promise<boolean> {
  const socket = dgram.createSocket(net.isIPv6(host) ? 'udp6' : 'udp4');
  return new Promise((resolve) => {
    socket.once('error', (error: NodeJS.ErrnoException) => {
      socket.close();
      resolve(error.code === 'EADDRINUSE');
    });
    socket.bind({ address: host, port, exclusive: true }, () => {
      socket.close();
      resolve(false);
    });
  });
}

export interface TcpRefusals {
  limit: number;
  perClient: number;
}

/** TCP connections we closed because their client stopped reading its replies. */
export interface TcpStalls {
  /** Nothing read for --tcp-write-timeout. */
  timeout: number;
  /** Closed early to keep every connection's unsent replies within the total budget. */
  budget: number;
}

export interface DnsListener {
  readonly host: string;
  readonly port: number;
  /** Open TCP connections, for metrics and tests. */
  tcpConnections(): number;
  /**
   * TCP connections closed at once because a cap was reached: the listener's (`limit`) or one
   * client's (`perClient`). Not those refused while draining, which is the point of draining.
   */
  tcpRefused(): Readonly<TcpRefusals>;
  /** Connections closed because their client stopped reading (the write timeout, or the total budget). */
  tcpStalls(): Readonly<TcpStalls>;
  /** Reply octets waiting in every TCP connection for their clients to read them, as last measured. */
  tcpUnsentBytes(): number;
  /** Replies still being worked on, UDP and TCP. */
  inFlight(): number;
  /** UDP queries dropped unread because the socket was behind (`shedAfterMs`). */
  udpShed(): number;
  /** The UDP receive buffer the kernel granted, in bytes (Linux reports twice what it holds of data). */
  udpReceiveBufferBytes(): number;
  /**
   * Drains, then closes: stops reading (new datagrams are ignored, new connections refused, open
   * connections read no further), lets the replies in flight be sent, bounded by `deadlineMs`,
   * then closes every socket. Safe to call twice. With `reusePort`, datagrams are still answered
   * until the UDP socket closes (the first moment nothing is in flight, or the deadline).
   */
  close(options?: { deadlineMs?: number }): Promise<void>;
}

const BIND_ATTEMPTS = 20;
/** A connection's own cap on unsent replies: a few large answers, far above what a reading client holds. */
export const DEFAULT_TCP_UNSENT_BYTES = 64 * 1024;
/** Every connection's unsent replies together: well inside the smallest container limit we ship (64Mi). */
export const DEFAULT_TCP_UNSENT_TOTAL_BYTES = 16 * 1024 * 1024;
export const DEFAULT_TCP_WRITE_TIMEOUT_MS = 10_000;
/** How often unsent replies are measured: the total budget and the write timeout act at this grain. */
const UNSENT_SWEEP_MS = 250;
const DEFAULT_DRAIN_MS = 5000;
/** Holds ~4,000 queries: a second of a busy node's traffic at the default rmem_max of a tuned host. */
export const DEFAULT_UDP_RECEIVE_BUFFER_BYTES = 4 * 1024 * 1024;

/**
 * Binds UDP and TCP on one port, as every DNS server must (RFC 7766). With port 0 it binds TCP
 * first, then UDP on the port TCP got, and tries again if UDP finds it taken.
 */
export async function listenDns(options: ListenDnsOptions): Promise<DnsListener> {
  if (options.reusePort && !reusePortSupported())
    throw new DnsBindError(
      `${options.host}:${options.port}`,
      new Error(`SO_REUSEPORT needs Node 22.12 or later; this is ${process.version}`),
      options.flags,
    );
  const reusePort = options.reusePort === true;
  let lastError: unknown;
  for (let attempt = 0; attempt < (options.port === 0 ? BIND_ATTEMPTS : 1); attempt++) {
    const tcp = net.createServer({ allowHalfOpen: true, noDelay: true });
    try {
      await listenTcp(tcp, options.host, options.port, reusePort);
    } catch (error) {
      throw new DnsBindError(`${options.host}:${options.port}/tcp`, error, options.flags);
    }
    const port = (tcp.address() as net.AddressInfo).port;
    const family = net.isIPv6(options.host) ? 6 : 4;
    const udp = dgram.createSocket({
      type: family === 6 ? 'udp6' : 'udp4',
      lookup: literalLookup(family),
      // Node 22.12+; older Node ignores unknown options, which the check above rules out.
      ...(reusePort ? { reusePort: true } : {}),
    } as dgram.SocketOptions);
    try {
      await bindUdp(udp, options.host, port);
    } catch (error) {
      lastError = error;
      await new Promise<void>((resolve) => tcp.close(() => resolve()));
      udp.close();
      if (options.port !== 0) throw new DnsBindError(`${options.host}:${port}/udp`, error, options.flags);
      continue;
    }
    try {
      udp.setRecvBufferSize(options.udpReceiveBufferBytes ?? DEFAULT_UDP_RECEIVE_BUFFER_BYTES);
    } catch {
      // Some sandboxes refuse SO_RCVBUF; the kernel's default buffer still works.
    }
    return serve(options, tcp, udp, port, family);
  }
  throw new DnsBindError(`${options.host}:0`, lastError, options.flags);
}

/**
 * Replies go to the address a query came from, always an IP literal. Node's default lookup defers
 * every send by a tick even for literals; this one answers at once (a tenth of a cache hit's cost).
 */
export function literalLookup(family: 4 | 6) {
  return (
    address: string,
    _options: unknown,
    callback: (error: Error | null, address: string, family: number) => void,
  ) => callback(null, address, family);
}

function listenTcp(server: net.Server, host: string, port: number, reusePort: boolean): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(
      { host, port, exclusive: true, ...(reusePort ? { reusePort: true } : {}) } as net.ListenOptions,
      () => {
        server.off('error', reject);
        resolve();
      },
    );
  });
}

function bindUdp(socket: dgram.Socket, host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    socket.once('error', reject);
    socket.bind({ address: host, port, exclusive: true }, () => {
      socket.off('error', reject);
      resolve();
    });
  });
}

function serve(
  options: ListenDnsOptions,
  tcp: net.Server,
  udp: dgram.Socket,
  port: number,
  family: 4 | 6,
): DnsListener {
  const { handler } = options;
  const reusePort = options.reusePort === true;
  const connections = new Set<TcpConnection>();
  const reportError = (error: unknown, context: QueryContext) => options.onHandlerError?.(error, context);
  let udpPending = 0;
  let draining = false;
  let udpClosed = false;
  let closing: Promise<void> | undefined;
  let settled: (() => void) | undefined;
  const checkSettled = () => {
    if (settled && udpPending === 0 && [...connections].every((c) => c.settled())) settled();
  };

  // A send error (say, the client's port is gone) concerns one packet, not the server: sends
  // carry no callback (with one, Node defers it by a tick even when the send is done at once, a
  // tenth of a cache hit's cost), so their errors arrive here.
  udp.on('error', (error) => reportError(error, { transport: 'udp', remoteAddress: '', remotePort: 0, family }));
  const { express, door } = options;
  const release = door?.release?.bind(door);
  const sendOne = (message: Buffer, port: number, address: string) => {
    const out = release === undefined ? message : release(message, address);
    if (out !== null) udp.send(out, port, address);
  };
  const sendUdp = (reply: Reply, port: number, address: string) => {
    if (udpClosed || reply === undefined) return;
    if (Buffer.isBuffer(reply)) sendOne(reply, port, address);
    else for (const message of reply) sendOne(message, port, address);
  };
  const backlog = options.shedAfterMs
    ? new UdpBacklog(options.shedAfterMs, udpQueueReader(options.host, port, family))
    : undefined;
  udp.on('message', (msg, rinfo) => {
    // Draining: a socket alone on its port drops what comes (nothing else would answer it, and the
    // drain must end). One in a SO_REUSEPORT group keeps answering until it closes: the kernel
    // sends this socket its share of clients until then, and a datagram left unread is a query
    // lost, where after the close the same client's retry reaches a socket of the newer instance.
    if (draining && !reusePort) return;
    if (backlog?.arrived()) return;
    if (door !== undefined) {
      const verdict = door.admit(msg, rinfo.address, 'udp');
      if (verdict !== undefined) {
        if (verdict !== null && !udpClosed) udp.send(verdict, rinfo.port, rinfo.address);
        return;
      }
    }
    if (express !== undefined) {
      let answered: Buffer | undefined;
      try {
        answered = express(msg, family, rinfo.address);
      } catch (error) {
        // A lane that fails leaves the query to the handler, whose own checks answer it.
        reportError(error, { transport: 'udp', remoteAddress: rinfo.address, remotePort: rinfo.port, family });
      }
      if (answered !== undefined) return sendUdp(answered, rinfo.port, rinfo.address);
    }
    const context: QueryContext = { transport: 'udp', remoteAddress: rinfo.address, remotePort: rinfo.port, family };
    let reply: Reply | Promise<Reply>;
    try {
      reply = handler(msg, context);
    } catch (error) {
      reportError(error, context);
      return;
    }
    if (!(reply instanceof Promise)) return sendUdp(reply, rinfo.port, rinfo.address);
    udpPending++;
    reply
      .then(
        (answer) => sendUdp(answer, rinfo.port, rinfo.address),
        (error: unknown) => reportError(error, context),
      )
      .finally(() => {
        udpPending--;
        checkSettled();
      });
  });

  // Over TCP the door sees each message before the handler; what it sends instead is written as a reply.
  const tcpHandler: RawHandler =
    door === undefined
      ? handler
      : (message, context) => {
          const verdict = door.admit(message, context.remoteAddress, 'tcp');
          return verdict === undefined ? handler(message, context) : (verdict ?? undefined);
        };
  const idleMs = options.tcpIdleTimeoutMs ?? 10_000;
  const maxConnections = options.maxTcpConnections ?? 1000;
  const maxPerClient = options.maxTcpConnectionsPerClient ?? maxConnections;
  const perClient = new Map<string, Set<TcpConnection>>();
  const tcpRefusals: TcpRefusals = { limit: 0, perClient: 0 };
  const maxPipelined = options.maxTcpPipelined ?? 100;
  const maxUnsentBytes = options.maxTcpUnsentBytes ?? DEFAULT_TCP_UNSENT_BYTES;
  const maxUnsentTotal = options.maxTcpUnsentTotalBytes ?? DEFAULT_TCP_UNSENT_TOTAL_BYTES;
  const writeTimeoutMs = options.tcpWriteTimeoutMs ?? DEFAULT_TCP_WRITE_TIMEOUT_MS;
  const stalls: TcpStalls = { timeout: 0, budget: 0 };
  let overBudget = false;
  let unsentTotal = 0;
  let unsentSweep: NodeJS.Timeout | undefined;
  /** Connections holding unsent replies: the flush count last seen, and since when it has not moved. */
  const watched = new Map<TcpConnection, { flushes: number; sinceMs: number }>();
  // Every connection's unsent replies, measured: one whose client has read nothing for the write
  // timeout is closed; past the total budget, those that read nothing since the last sweep are
  // closed largest first, and the rest stop taking queries until it is back under.
  const sweepUnsent = () => {
    const nowMs = performance.now();
    let total = 0;
    const idle: Array<[TcpConnection, number]> = [];
    for (const c of connections) {
      const unsent = c.closed() ? 0 : c.unsentBytes();
      if (unsent === 0) {
        watched.delete(c);
        continue;
      }
      total += unsent;
      const seen = watched.get(c);
      if (!seen || seen.flushes !== c.flushes()) {
        watched.set(c, { flushes: c.flushes(), sinceMs: nowMs });
        continue;
      }
      if (nowMs - seen.sinceMs >= writeTimeoutMs) {
        stalls.timeout++;
        total -= unsent;
        watched.delete(c);
        c.destroy();
      } else idle.push([c, unsent]);
    }
    if (total > maxUnsentTotal) {
      idle.sort((a, b) => b[1] - a[1]);
      for (const [c, unsent] of idle) {
        if (total <= maxUnsentTotal) break;
        stalls.budget++;
        total -= unsent;
        watched.delete(c);
        c.destroy();
      }
    }
    unsentTotal = total;
    const wasOver = overBudget;
    overBudget = total > maxUnsentTotal;
    if (wasOver && !overBudget) for (const c of connections) c.readIfAble();
  };
  // A connection we closed (idle, drained) is counted until Node's 'close' event, a turn after its
  // FIN went out: a client that reconnects at once must not find its slot still taken. Counted
  // again only at a cap, so the common case costs nothing.
  const stillOpen = (of: Iterable<TcpConnection>) => {
    let open = 0;
    for (const c of of) if (!c.closed()) open++;
    return open;
  };
  tcp.on('error', (error) => reportError(error, { transport: 'tcp', remoteAddress: '', remotePort: 0, family }));
  tcp.on('connection', (socket) => {
    const client = socket.remoteAddress ?? '';
    const fromClient = perClient.get(client) ?? new Set<TcpConnection>();
    // One client holding many connections is cut off before it can take them all from the others.
    const refused = draining
      ? 'draining'
      : connections.size >= maxConnections && stillOpen(connections) >= maxConnections
        ? 'limit'
        : fromClient.size >= maxPerClient && stillOpen(fromClient) >= maxPerClient
          ? 'perClient'
          : undefined;
    if (refused !== undefined) {
      if (refused !== 'draining') tcpRefusals[refused]++;
      socket.destroy();
      return;
    }
    const connection = serveTcpConnection(socket, {
      handler: tcpHandler,
      idleMs,
      maxPipelined,
      maxUnsentBytes,
      overBudget: () => overBudget,
      reportError,
      onSettle: checkSettled,
    });
    connections.add(connection);
    unsentSweep ??= setInterval(sweepUnsent, UNSENT_SWEEP_MS).unref();
    fromClient.add(connection);
    perClient.set(client, fromClient);
    socket.on('close', () => {
      connections.delete(connection);
      watched.delete(connection);
      if (connections.size === 0) {
        clearInterval(unsentSweep);
        unsentSweep = undefined;
      }
      fromClient.delete(connection);
      if (fromClient.size === 0 && perClient.get(client) === fromClient) perClient.delete(client);
      checkSettled();
    });
  });

  const close = (deadlineMs: number) => {
    draining = true;
    tcp.close();
    for (const c of connections) c.drain();
    const allSettled = new Promise<void>((resolve) => {
      settled = resolve;
    });
    checkSettled();
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, deadlineMs);
      timer.unref();
    });
    return Promise.race([allSettled, deadline]).then(() => {
      clearTimeout(timer);
      clearInterval(unsentSweep);
      for (const c of connections) c.destroy();
      udpClosed = true;
      return new Promise<void>((resolve) => {
        try {
          udp.close(() => resolve());
        } catch {
          // Closed already (a bind that failed half way): nothing is left to close.
          resolve();
        }
      });
    });
  };

  return {
    host: options.host,
    port,
    tcpConnections: () => connections.size,
    tcpRefused: () => tcpRefusals,
    tcpStalls: () => stalls,
    udpShed: () => backlog?.shed ?? 0,
    tcpUnsentBytes: () => unsentTotal,
    inFlight: () => udpPending + [...connections].reduce((n, c) => n + c.pending(), 0),
    udpReceiveBufferBytes: () => {
      try {
        return udp.getRecvBufferSize();
      } catch {
        return 0;
      }
    },
    close: (closeOptions = {}) => {
      closing ??= close(closeOptions.deadlineMs ?? DEFAULT_DRAIN_MS);
      return closing;
    },
  };
}
