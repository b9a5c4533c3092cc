import { Buffer } from 'node:buffer';
import type net from 'node:net';
import { TCP_MAX_BYTES } from './constants.js';
import type { QueryContext, RawHandler, Reply } from './dns-handler.js';

/**
 * Queries one connection may hand to the handler in one turn of the event loop before it lets the
 * others have theirs (as libuv reads at most 32 datagrams off a UDP socket a turn): one client that
 * pipelined thousands in one write gets them answered a batch a turn, not all before anyone else.
 */
export const TCP_TURN_BATCH = 32;

export interface TcpConnection {
  /** Queries read and not yet answered. */
  pending(): number;
  /** Reply octets written and not yet taken by the kernel. */
  unsentBytes(): number;
  /** How many writes the kernel has taken so far: unchanged while unsent octets wait, the client reads nothing. */
  flushes(): number;
  /** True once draining is over: every answer and our FIN handed to the kernel, or the socket gone. */
  settled(): boolean;
  /** Read no more; end the connection once the pending answers are written. */
  drain(): void;
  /** Reads again if nothing holds it back now (the listener's budget freed up). */
  readIfAble(): void;
  destroy(): void;
  /** True once our side is closed (destroyed): its fd is gone, though Node's 'close' event comes a turn later. */
  closed(): boolean;
}

export interface TcpConnectionOptions {
  handler: RawHandler;
  idleMs: number;
  maxPipelined: number;
  /**
   * Stop reading queries while this many reply octets wait for the client to read them. A client
   * that pipelines and never reads would otherwise have every reply buffered here, without bound.
   */
  maxUnsentBytes: number;
  /** True while the listener's connections together hold too many unsent octets: then a connection with any reads none. */
  overBudget(): boolean;
  reportError: (error: unknown, context: QueryContext) => void;
  /** Called when the connection may have settled (its last answer or its FIN went out). */
  onSettle: () => void;
}

/**
 * One client connection, RFC 7766: two-octet length prefix, several queries per connection,
 * answers in the order they are ready. Queries are taken from what was read only while fewer than
 * `maxPipelined` answers are owed and fewer than `maxUnsentBytes` of answers wait for the client
 * (and the listener is within its budget); otherwise the socket is paused, so the kernel's
 * buffers, not ours, hold what the client sends. A half-close by the client still gets its
 * answers, every query it sent first, then our FIN. A connection idle for `idleMs`, or holding a
 * partial message that long (a slow trickle), is closed; one whose client stops reading is closed
 * by the listener (`flushes`).
 */
export function serveTcpConnection(socket: net.Socket, options: TcpConnectionOptions): TcpConnection {
  const { handler, maxPipelined, maxUnsentBytes, reportError } = options;
  const context: QueryContext = {
    transport: 'tcp',
    remoteAddress: socket.remoteAddress ?? '',
    remotePort: socket.remotePort ?? 0,
    family: socket.remoteFamily === 'IPv6' ? 6 : 4,
  };
  let buffered = Buffer.alloc(0);
  let pending = 0;
  /** Set at shutdown: no new query is taken. */
  let draining = false;
  /** The client half-closed: what it sent before is still answered. */
  let clientEnded = false;
  let flushes = 0;
  let partialTimer: NodeJS.Timeout | undefined;
  /** A batch was taken this turn and more are waiting: the rest is taken next turn. */
  let resumeScheduled = false;
  let taking = false;
  const resumeNextTurn = () => {
    resumeScheduled = false;
    takeQueries();
  };
  const flushed = () => {
    flushes++;
  };

  const hasWholeMessage = () => buffered.length >= 2 && buffered.length >= 2 + buffered.readUInt16BE(0);
  const mayTakeQueries = () =>
    !draining &&
    pending < maxPipelined &&
    socket.writableLength < maxUnsentBytes &&
    !(socket.writableLength > 0 && options.overBudget());
  const endIfDone = () => {
    if (pending === 0 && (draining || (clientEnded && !hasWholeMessage())) && !socket.destroyed) socket.end();
  };
  const writeFrame = (message: Buffer): boolean => {
    const frame = Buffer.allocUnsafe(message.length + 2);
    frame.writeUInt16BE(message.length, 0);
    message.copy(frame, 2);
    return socket.write(frame, flushed);
  };
  const answered = () => {
    pending--;
    takeQueries();
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
  /**
   * Hands whole messages read to the handler while nothing holds it back, TCP_TURN_BATCH a turn;
   * pauses the socket while something does, or while a batch's rest waits for the next turn.
   */
  function takeQueries(): void {
    // A reply made at once comes back here through answered(): the loop below goes on instead.
    if (resumeScheduled || taking) return;
    taking = true;
    try {
      takeBatch();
    } finally {
      taking = false;
    }
    if (socket.destroyed || resumeScheduled) return;
    if (mayTakeQueries() && !hasWholeMessage()) {
      if (socket.isPaused() && !clientEnded) socket.resume();
    } else if (!socket.isPaused()) socket.pause();
  }

  function takeBatch(): void {
    let taken = 0;
    while (mayTakeQueries() && hasWholeMessage()) {
      if (taken === TCP_TURN_BATCH) {
        resumeScheduled = true;
        setImmediate(resumeNextTurn);
        if (!socket.isPaused()) socket.pause();
        return;
      }
      taken++;
      const length = buffered.readUInt16BE(0);
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
  }

  socket.on('error', () => {
    // A reset by the client ends that connection only; 'close' follows and cleans up.
  });
  socket.on('close', () => clearTimeout(partialTimer));
  socket.on('finish', options.onSettle);
  socket.on('drain', takeQueries);
  socket.on('end', () => {
    clientEnded = true;
    clearTimeout(partialTimer);
    endIfDone();
  });
  socket.setTimeout(options.idleMs, () => {
    // Not idle while answers are owed (a slow upstream); the partial-message timer bounds trickles.
    if (pending === 0 && socket.writableLength === 0) socket.destroy();
  });
  socket.on('data', (chunk) => {
    if (draining) return;
    buffered = buffered.length === 0 ? chunk : Buffer.concat([buffered, chunk]);
    takeQueries();
    clearTimeout(partialTimer);
    partialTimer = undefined;
    // A partial message with nothing holding it back is a trickle: bounded by the idle time.
    if (buffered.length > 0 && !hasWholeMessage()) {
      partialTimer = setTimeout(() => socket.destroy(), options.idleMs);
      partialTimer.unref();
    }
  });

  return {
    pending: () => pending,
    unsentBytes: () => socket.writableLength,
    flushes: () => flushes,
    settled: () => socket.destroyed || ((draining || clientEnded) && pending === 0 && socket.writableFinished),
    drain: () => {
      draining = true;
      clearTimeout(partialTimer);
      socket.pause();
      endIfDone();
    },
    readIfAble: takeQueries,
    destroy: () => socket.destroy(),
    closed: () => socket.destroyed,
  };
}
