import { Buffer } from 'node:buffer';
import { RCODE, RCODE_MASK } from './constants.js';
import type { Transport } from './response.js';

// What every DNS server here is: a handler of raw messages, told where each came from. Its own
// file so the listener and the TCP connection both use it without importing each other.

/** Where a message came from. */
export interface QueryContext {
  transport: Transport;
  remoteAddress: string;
  remotePort: number;
  /** The address family of remoteAddress: metrics label by it, and a string search per query to tell is not free. */
  family: 4 | 6;
}

/**
 * Answers one raw message; undefined means send nothing (a dropped packet). An array sends several
 * messages in order (test servers use it to forge a reply over UDP); any other iterable is a lazy
 * one (a zone transfer over TCP): each message is made when the socket has taken the previous.
 */
export type Reply = Buffer | readonly Buffer[] | Iterable<Buffer> | undefined;
export type RawHandler = (message: Buffer, context: QueryContext) => Reply | Promise<Reply>;

/** The rcode of a reply of one message; SERVFAIL for none (dropped) or several. */
export function replyRcode(reply: Reply): number {
  return Buffer.isBuffer(reply) && reply.length >= 4 ? (reply[3] as number) & RCODE_MASK : RCODE.SERVFAIL;
}

/**
 * Answers a UDP query at once, before the handler, when it can (a cache hit); undefined hands the
 * query to the handler. It sees only the message, the socket's address family and the sender's
 * address, counts what it answers itself, and must answer nothing the handler would answer
 * differently.
 */
export type ExpressLane = (message: Buffer, family: 4 | 6, remoteAddress: string) => Buffer | undefined;

/**
 * Who may be served, decided before anything reads a message: per-client limits and the like
 * (the forwarder's isolation). Both calls run for every message, so they must be cheap.
 */
export interface Door {
  /**
   * Before the express lane and the handler: undefined lets the message in, null drops it
   * unanswered, and a Buffer is sent in its stead.
   */
  admit(message: Buffer, address: string, transport: Transport): Buffer | null | undefined;
  /**
   * A UDP reply about to be sent to `address` (the express lane's and the handler's alike):
   * returns it, or something smaller to send instead (a TC reply), or null to send nothing.
   */
  release?(reply: Buffer, address: string): Buffer | null;
}
