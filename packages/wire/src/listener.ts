import dgram from 'node:dgram';
import net from 'node:net';
import { DnsBindError } from './errors.js';
import type { Transport } from './response.js';

export interface QueryContext {
  transport: Transport;
  remoteAddress: string;
  remotePort: number;
}

/**
 * Answers one raw message; undefined means send nothing (a dropped packet). An array sends several
 * messages in order (a zone transfer over TCP; test servers use it to forge a reply over UDP).
 */
export type Reply = Buffer | readonly Buffer[] | undefined;
export type RawHandler = (message: Buffer, context: QueryContext) => Reply | Promise<Reply>;

export interface ListenDnsOptions {
  host: string;
  /** 0 picks a free port, the same for UDP and TCP. */
  port: number;
  handler: RawHandler;
  /** Called when the handler throws; the packet is then dropped. */
  onHandlerError?: (error: unknown, context: QueryContext) => void;
  /** RFC 7766 §6.2.3: close a TCP connection idle this long. */
  tcpIdleTimeoutMs?: number;
  /** New TCP connections past this many are closed at once. */
  maxTcpConnections?: number;
  /** Pause reading a TCP connection while this many of its queries are unanswered. */
  maxTcpPipelined?: number;
}

export interface DnsListener {
  readonly host: string;
  readonly port: number;
  /** Open TCP connections, for metrics and tests. */
  tcpConnections(): number;
  close(): Promise<void>;
}

const BIND_ATTEMPTS = 20;

/**
 * Binds UDP and TCP on one port, as every DNS server must (RFC 7766). With port 0 it binds TCP
 * first, then UDP on the port TCP got, and tries again if UDP finds it taken.
 */
export async function listenDns(options: ListenDnsOptions): Promise<DnsListener> {
  let lastError: unknown;
  for (let attempt = 0; attempt < (options.port === 0 ? BIND_ATTEMPTS : 1); attempt++) {
    const tcp = net.createServer({ allowHalfOpen: false, noDelay: true });
    try {
      await listenTcp(tcp, options.host, options.port);
    } catch (error) {
      throw new DnsBindError(`${options.host}:${options.port}/tcp`, error);
    }
    const port = (tcp.address() as net.AddressInfo).port;
    const family = net.isIPv6(options.host) ? 6 : 4;
    const udp = dgram.createSocket({ type: family === 6 ? 'udp6' : 'udp4', lookup: literalLookup(family) });
    try {
      await bindUdp(udp, options.host, port);
    } catch (error) {
      lastError = error;
      await new Promise<void>((resolve) => tcp.close(() => resolve()));
      udp.close();
      if (options.port !== 0) throw new DnsBindError(`${options.host}:${port}/udp`, error);
      continue;
    }
    return serve(options, tcp, udp, port);
  }
  throw new DnsBindError(`${options.host}:0`, lastError);
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

function listenTcp(server: net.Server, host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host, port, exclusive: true }, () => {
      server.off('error', reject);
      resolve();
    });
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

function serve(options: ListenDnsOptions, tcp: net.Server, udp: dgram.Socket, port: number): DnsListener {
  const { handler } = options;
  const idleMs = options.tcpIdleTimeoutMs ?? 10_000;
  const maxConnections = options.maxTcpConnections ?? 1000;
  const maxPipelined = options.maxTcpPipelined ?? 100;
  const sockets = new Set<net.Socket>();
  const reportError = (error: unknown, context: QueryContext) => options.onHandlerError?.(error, context);

  // A send error (say, the client's port is gone) concerns one packet, not the server.
  udp.on('error', (error) => reportError(error, { transport: 'udp', remoteAddress: '', remotePort: 0 }));
  udp.on('message', (msg, rinfo) => {
    const context: QueryContext = { transport: 'udp', remoteAddress: rinfo.address, remotePort: rinfo.port };
    const send = (reply: Reply) => {
      if (Buffer.isBuffer(reply)) udp.send(reply, rinfo.port, rinfo.address);
      else for (const message of reply ?? []) udp.send(message, rinfo.port, rinfo.address);
    };
    try {
      const reply = handler(msg, context);
      if (reply instanceof Promise) reply.then(send, (error: unknown) => reportError(error, context));
      else send(reply);
    } catch (error) {
      reportError(error, context);
    }
  });

  tcp.on('error', (error) => reportError(error, { transport: 'tcp', remoteAddress: '', remotePort: 0 }));
  tcp.on('connection', (socket) => {
    if (sockets.size >= maxConnections) {
      socket.destroy();
      return;
    }
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {
      // A reset by the client ends that connection only; 'close' follows and cleans up.
    });
    socket.setTimeout(idleMs, () => socket.destroy());
    serveTcpConnection(socket, handler, maxPipelined, reportError);
  });

  return {
    host: options.host,
    port,
    tcpConnections: () => sockets.size,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        let pending = 2;
        const done = () => --pending === 0 && resolve();
        try {
          udp.close(done);
        } catch {
          // Already closed: close() is safe to call twice.
          done();
        }
        tcp.close(() => done());
      }),
  };
}

/** RFC 7766: two-octet length prefix, several queries per connection, answers as they are ready. */
function serveTcpConnection(
  socket: net.Socket,
  handler: RawHandler,
  maxPipelined: number,
  reportError: (error: unknown, context: QueryContext) => void,
): void {
  const context: QueryContext = {
    transport: 'tcp',
    remoteAddress: socket.remoteAddress ?? '',
    remotePort: socket.remotePort ?? 0,
  };
  let buffered = Buffer.alloc(0);
  let pending = 0;
  const write = (reply: Reply) => {
    pending--;
    const messages = reply === undefined ? [] : Buffer.isBuffer(reply) ? [reply] : reply;
    for (const message of messages) {
      if (socket.destroyed) break;
      const frame = Buffer.allocUnsafe(message.length + 2);
      frame.writeUInt16BE(message.length, 0);
      message.copy(frame, 2);
      socket.write(frame);
    }
    if (pending < maxPipelined && socket.isPaused()) socket.resume();
  };
  socket.on('data', (chunk) => {
    buffered = buffered.length === 0 ? chunk : Buffer.concat([buffered, chunk]);
    while (buffered.length >= 2) {
      const length = buffered.readUInt16BE(0);
      if (buffered.length < 2 + length) break;
      const message = buffered.subarray(2, 2 + length);
      buffered = buffered.subarray(2 + length);
      pending++;
      try {
        const reply = handler(message, context);
        if (reply instanceof Promise) {
          reply.then(write, (error: unknown) => {
            reportError(error, context);
            write(undefined);
          });
        } else write(reply);
      } catch (error) {
        reportError(error, context);
        write(undefined);
      }
    }
    if (pending >= maxPipelined) socket.pause();
  });
}
