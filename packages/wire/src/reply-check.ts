import type { Buffer } from 'node:buffer';
import { FLAG, HEADER_BYTES, RCODE, RCODE_MASK } from './constants.js';

/**
 * Why a datagram was not taken as the answer to our query: it came from elsewhere, carries another
 * ID or question, is not a response, or (with 0x20) echoes our question in another case.
 */
export type RejectReason = 'source' | 'id' | 'question' | 'not-a-response' | 'case';

/** Offset just past the question of a message we wrote (one question, its name uncompressed), or -1. */
export function questionEndOf(message: Uint8Array): number {
  if (message.length < HEADER_BYTES + 5 || message[4] !== 0 || message[5] !== 1) return -1;
  let pos = HEADER_BYTES;
  for (;;) {
    const len = message[pos];
    if (len === undefined || len > 63) return -1;
    if (len === 0) break;
    pos += len + 1;
  }
  const end = pos + 1 + 4;
  return end <= message.length ? end : -1;
}

/**
 * How the question of `reply` compares with ours (the octets of `query` from the header to
 * `queryEnd`): 'same' octet for octet, 'case' when only ASCII letters differ in case, 'other'
 * otherwise. The first name of a message has nothing before it to point at, so a reply's
 * question is compared as it stands, without decoding a name.
 */
export function compareQuestion(reply: Uint8Array, query: Uint8Array, queryEnd: number): 'same' | 'case' | 'other' {
  if (reply.length < queryEnd || reply[4] !== 0 || reply[5] !== 1) return 'other';
  let caseOnly = false;
  for (let i = HEADER_BYTES; i < queryEnd; i++) {
    const a = reply[i] as number;
    const b = query[i] as number;
    if (a === b) continue;
    // Only within the name (not QTYPE/QCLASS), and only letters: 'A'..'Z' vs 'a'..'z'.
    if (i >= queryEnd - 4 || (a | 0x20) !== (b | 0x20) || (a | 0x20) < 0x61 || (a | 0x20) > 0x7a) return 'other';
    caseOnly = true;
  }
  return caseOnly ? 'case' : 'same';
}

const NO_QUESTION_RCODES = new Set<number>([RCODE.FORMERR, RCODE.SERVFAIL, RCODE.NOTIMP, RCODE.REFUSED]);

/**
 * Why a reply does not answer `query` (whose question ends at `queryEnd`), or undefined when it
 * does: a response, with the query's ID and question (RFC 5452 §9.1), in any case. Whether the
 * case was echoed (0x20) is the sender's to check (compareQuestion), since only it knows whether
 * it randomised the case, and what to do with a server that does not echo it.
 */
export function checkReply(reply: Buffer, query: Buffer, queryEnd: number): RejectReason | undefined {
  if (reply.length < HEADER_BYTES || (reply.readUInt16BE(2) & FLAG.QR) === 0) return 'not-a-response';
  if (reply[0] !== query[0] || reply[1] !== query[1]) return 'id';
  // A server that could not read the question (FORMERR, NOTIMP) or will not answer it may leave
  // it out; such a reply is a failure, accepted on the ID alone. An answer or a denial without
  // the question proves nothing about what it answers.
  if (reply.readUInt16BE(4) === 0 && NO_QUESTION_RCODES.has(reply.readUInt16BE(2) & RCODE_MASK)) return undefined;
  return compareQuestion(reply, query, queryEnd) === 'other' ? 'question' : undefined;
}
