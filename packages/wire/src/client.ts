import { Buffer } from 'node:buffer';
import { randomBytes } from 'node:crypto';
import dgram from 'node:dgram';
import net from 'node:net';
import { type Cancellation, whenCancelled } from './cancellation.js';
import { FLAG, HEADER_BYTES, RCODE_MASK } from './constants.js';
import { ConnectionClosedError, DnsTimeoutError } from './errors.js';
import { buildQueryMessage, type DecodedMessage, decodeMessage, encodeMessage } from './message.js';
import { checkReply, compareQuestion, questionEndOf, type RejectReason } from './reply-check.js';
import type { Transport } from './response.js';

export interface DnsServer {
  readonly host: string;
  readonly port: number;
}

export interface ExchangeOptions {
  transport?: Transport;
  timeoutMs?: number;
  /** Told about each reply dropped as a possible spoof; the wait goes on. */
  onRejected?: (reason: RejectReason) => void;
  /** Gives up at once when cancelled (rejecting with its reason), freeing the socket. */
  cancel?: Cancellation;
  /** The source address to send from (tests play several clients from 127.0.0.0/8). */
  localAddress?: string;
}

let idPool = randomBytes(0);
/** A random 16-bit query ID (RFC 5452 §9.2), from a pooled CSPRNG read. */
export function randomQueryId(): number {
  if (idPool.length < 2) idPool = randomBytes(2048);
  const id = idPool.readUInt16BE(0);
  idPool = idPool.subarray(2);
  return id;
}

/**
 * Sends one raw query and returns the raw reply. Over UDP it uses a fresh socket (a random source
 * port) and accepts only a reply from the server asked, with the query's ID and question.
 */
export function exchangeRaw(server: DnsServer, query: Buffer, options: ExchangeOptions = {}): Promise<Buffer> {
  const timeoutMs = options.timeoutMs ?? 2000;
  return options.transport === 'tcp'
    ? exchangeTcp(server, query, timeoutMs, options)
    : exchangeUdp(server, query, timeoutMs, options);
}

function exchangeUdp(server: DnsServer, query: Buffer, timeoutMs: number, options: ExchangeOptions): Promise<Buffer> {
  const timeoutError = new DnsTimeoutError(`${server.host}:${server.port}`, timeoutMs);
  const queryEnd = questionEndOf(query);
  return new Promise((resolve, reject) => {
    const socket = dgram.createSocket(net.isIPv6(server.host) ? 'udp6' : 'udp4');
    let done = false;
    let detach = () => {};
    const finish = (error: Error | undefined, reply?: Buffer) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      detach();
      socket.close();
      if (error) reject(error);
      else resolve(reply as Buffer);
    };
    const timer = setTimeout(() => finish(timeoutError), timeoutMs);
    detach = whenCancelled(options.cancel, finish);
    if (done) return;
    socket.on('error', (error) => finish(error));
    socket.on('message', (reply, rinfo) => {
      const reason = checkReply(reply, query, queryEnd);
      const fromServer = rinfo.address === server.host && rinfo.port === server.port;
      if (!fromServer) options.onRejected?.('source');
      else if (reason) options.onRejected?.(reason);
      else finish(undefined, reply);
    });
    // Connected, so a server that is not listening fails the exchange at once (ICMP port
    // unreachable reads as ECONNREFUSED) instead of at the timeout: a NOTIFY to a forwarder still
    // starting is retried in milliseconds. The kernel then drops datagrams from anyone else too.
    // The callback also gets a failed connect (ENETUNREACH for a target with no route): sending on
    // the unconnected socket then would throw out of the callback and take the process down.
    const connect = () =>
      socket.connect(server.port, server.host, (error?: Error) => {
        if (error) finish(error);
        else if (!done) socket.send(query);
      });
    if (options.localAddress === undefined) connect();
    else socket.bind({ address: options.localAddress, port: 0 }, connect);
  });
}

function exchangeTcp(server: DnsServer, query: Buffer, timeoutMs: number, options: ExchangeOptions): Promise<Buffer> {
  const queryEnd = questionEndOf(query);
  let first: Buffer | undefined;
  return tcpMessages(server, query, timeoutMs, options, (reply) => {
    const reason = checkReply(reply, query, queryEnd);
    if (reason) {
      options.onRejected?.(reason);
      return false;
    }
    first = reply;
    return true;
  }).then(() => first as Buffer);
}

/**
 * A zone transfer over TCP (AXFR, RFC 5936; IXFR, RFC 1995): sends the query and hands each reply
 * message with its ID to `onMessage` until it returns true (the transfer is complete, or the caller
 * has seen enough: it may stop reading a long AXFR it does not need). Messages after the first may
 * carry no question. Rejects on timeout (for the whole transfer), or when the server closes first.
 */
export function transferTcp(
  server: DnsServer,
  query: Buffer,
  options: { timeoutMs?: number; onMessage(reply: Buffer): boolean },
): Promise<void> {
  const id = query.readUInt16BE(0);
  const queryEnd = questionEndOf(query);
  return tcpMessages(server, query, options.timeoutMs ?? 5000, {}, (reply) => {
    if (reply.length < HEADER_BYTES || (reply.readUInt16BE(2) & FLAG.QR) === 0 || reply.readUInt16BE(0) !== id)
      return false;
    if (
      reply.readUInt16BE(4) > 0 &&
      (reply.readUInt16BE(2) & RCODE_MASK) === 0 &&
      compareQuestion(reply, query, queryEnd) === 'other'
    )
      return false;
    return options.onMessage(reply);
  });
}

/** Length-prefixed messages off one TCP connection until `onReply` says done. */
function tcpMessages(
  server: DnsServer,
  query: Buffer,
  timeoutMs: number,
  from: Pick<ExchangeOptions, 'cancel' | 'localAddress'>,
  onReply: (reply: Buffer) => boolean,
): Promise<void> {
  const timeoutError = new DnsTimeoutError(`${server.host}:${server.port}/tcp`, timeoutMs);
  return new Promise((resolve, reject) => {
    const socket = net.connect({
      host: server.host,
      port: server.port,
      noDelay: true,
      ...(from.localAddress === undefined ? {} : { localAddress: from.localAddress }),
    });
    let buffered = Buffer.alloc(0);
    let settled = false;
    let detach = () => {};
    const finish = (error: Error | undefined) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      detach();
      socket.destroy();
      if (error) reject(error);
      else resolve();
    };
    const timer = setTimeout(() => finish(timeoutError), timeoutMs);
    detach = whenCancelled(from.cancel, finish);
    socket.on('error', (error) => finish(error));
    socket.on('close', () => finish(new ConnectionClosedError(`${server.host}:${server.port}`)));
    socket.on('connect', () => {
      const frame = Buffer.allocUnsafe(query.length + 2);
      frame.writeUInt16BE(query.length, 0);
      query.copy(frame, 2);
      socket.write(frame);
    });
    socket.on('data', (chunk) => {
      buffered = buffered.length ? Buffer.concat([buffered, chunk]) : chunk;
      while (!settled && buffered.length >= 2 && buffered.length >= 2 + buffered.readUInt16BE(0)) {
        const reply = Buffer.from(buffered.subarray(2, 2 + buffered.readUInt16BE(0)));
        buffered = buffered.subarray(2 + reply.length);
        try {
          if (onReply(reply)) return finish(undefined);
        } catch (error) {
          return finish(error as Error);
        }
      }
    });
  });
}

export interface QueryOptions extends ExchangeOptions {
  qclass?: number;
  rd?: boolean;
  opcode?: number;
  edns?: { udpSize: number; dnssecOk?: boolean };
}

/** Asks one question and decodes the reply: the client of probes, tests and the stats poller. */
export async function queryDns(
  server: DnsServer,
  name: string,
  type: number,
  options: QueryOptions = {},
): Promise<DecodedMessage> {
  const query = encodeMessage(buildQueryMessage(randomQueryId(), name, type, options));
  return decodeMessage(await exchangeRaw(server, query, options));
}
