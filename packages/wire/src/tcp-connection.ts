import { Buffer } from 'node:buffer';
import type net from 'node:net';
import { TCP_MAX_BYTES } from './constants.js';
import type { QueryContext, RawHandler, Reply } from './dns-handler.js';

export interface TcpConnection {
  /** Queries read and not yet answered. */
  pending(): number;
  /** True once draining is over: every answer and our FIN handed to the kernel, or the socket gone. */
  settled(): boolean;
  /** Read no more; end the connection once the pending answers are written. */
  drain(): void;
  destroy(): void;
  /** True once our side is closed (destroyed): its fd is gone, though Node's 'close' event comes a turn later. */
  closed(): boolean;
}

export interface TcpConnectionOptions {
  handler: RawHandler;
  idleMs: number;
  maxPipelined: number;
  reportError: (error: unknown, context: QueryContext) => void;
  /** Called when the connection may have settled (its last answer or its FIN went out). */
  onSettle: () => void;
}

/**
 * One client connection, RFC 7766: two-octet length prefix, several queries per connection,
 * answers in the order they are ready. Reading pauses while `maxPipelined` answers are owed. A
 * half-close by the client still gets its answers, then our FIN. A connection idle for `idleMs`,
 * or holding a partial message that long (a slow trickle), is closed.
 */
export function serveTcpConnection(socket: net.Socket, options: TcpConnectionOptions): TcpConnection {
  const { handler, maxPipelined, reportError } = options;
  const context: QueryContext = {
    transport: 'tcp',
    remoteAddress: socket.remoteAddress ?? '',
    remotePort: socket.remotePort ?? 0,
    family: socket.remoteFamily === 'IPv6' ? 6 : 4,
  };
  let buffered = Buffer.alloc(0);
  let pending = 0;
  let reading = true;
  let partialTimer: NodeJS.Timeout | undefined;

  const endIfDone = () => {
    if (pending === 0 && !reading && !socket.destroyed) socket.end();
  };
  const writeFrame = (message: Buffer): boolean => {
    const frame = Buffer.allocUnsafe(message.length + 2);
    frame.writeUInt16BE(message.length, 0);
    message.copy(frame, 2);
    return socket.write(frame);
  };
  const answered = () => {
    pending--;
    if (reading && pending < maxPipelined && socket.isPaused()) socket.resume();
    endIfDone();
    if (pending === 0) options.onSettle();
  };
  const write = (reply: Reply) => {
    if (reply !== undefined && !Buffer.isBuffer(reply) && !Array.isArray(reply)) {
      void stream((reply as Iterable<Buffer>)[Symbol.iterator]());
      return;
    }
    const messages = reply === undefined ? [] : Buffer.isBuffer(reply) ? [reply] : (reply as readonly Buffer[]);
    for (const message of messages) {
      if (socket.destroyed || socket.writableEnded || message.length > TCP_MAX_BYTES) break;
      writeFrame(message);
    }
    answered();
  };
  // A lazy reply (a zone transfer): each message is made only once the socket has taken the last,
  // so a long transfer neither sits in memory whole nor holds the thread, and one the client
  // abandons stops being made.
  const stream = async (messages: Iterator<Buffer>) => {
    try {
      for (let next = messages.next(); !next.done; next = messages.next()) {
        if (socket.destroyed || socket.writableEnded || next.value.length > TCP_MAX_BYTES) break;
        if (!writeFrame(next.value)) {
          await new Promise<void>((resolve) => {
            const done = () => {
              socket.off('drain', done);
              socket.off('close', done);
              resolve();
            };
            socket.on('drain', done);
            socket.on('close', done);
          });
        }
      }
    } catch (error) {
      reportError(error, context);
    } finally {
      messages.return?.();
      answered();
    }
  };
  const failed = (error: unknown) => {
    reportError(error, context);
    write(undefined);
  };
  const stopReading = () => {
    reading = false;
    clearTimeout(partialTimer);
    socket.pause();
    endIfDone();
  };

  socket.on('error', () => {
    // A reset by the client ends that connection only; 'close' follows and cleans up.
  });
  socket.on('close', () => clearTimeout(partialTimer));
  socket.on('finish', options.onSettle);
  socket.on('end', stopReading);
  socket.setTimeout(options.idleMs, () => {
    // Not idle while answers are owed (a slow upstream); the partial-message timer bounds trickles.
    if (pending === 0) socket.destroy();
  });
  socket.on('data', (chunk) => {
    if (!reading) return;
    buffered = buffered.length === 0 ? chunk : Buffer.concat([buffered, chunk]);
    while (reading && buffered.length >= 2) {
      const length = buffered.readUInt16BE(0);
      if (buffered.length < 2 + length) break;
      const message = buffered.subarray(2, 2 + length);
      buffered = buffered.subarray(2 + length);
      pending++;
      try {
        const reply = handler(message, context);
        if (reply instanceof Promise) reply.then(write, failed);
        else write(reply);
      } catch (error) {
        failed(error);
      }
    }
    clearTimeout(partialTimer);
    partialTimer = undefined;
    if (buffered.length > 0) {
      partialTimer = setTimeout(() => socket.destroy(), options.idleMs);
      partialTimer.unref();
    }
    if (pending >= maxPipelined) socket.pause();
  });

  return {
    pending: () => pending,
    settled: () => socket.destroyed || (!reading && pending === 0 && socket.writableFinished),
    drain: stopReading,
    destroy: () => socket.destroy(),
    closed: () => socket.destroyed,
  };
}
