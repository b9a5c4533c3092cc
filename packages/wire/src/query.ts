import {
  EDNS_DO_BIT,
  FLAG,
  HEADER_BYTES,
  OPCODE_MASK,
  OPCODE_SHIFT,
  QTYPE,
  UDP_LEGACY_MAX_BYTES,
} from './constants.js';
import { QueryFormatError } from './errors.js';
import { type Fqdn, toFqdn } from './fqdn.js';
import { labelNeedsEscape, MAX_NAME_OCTETS, readName, skipName } from './names-on-wire.js';

/** The EDNS0 pseudo-record of a message (RFC 6891 §6.1). */
export interface Edns {
  /** The requestor's UDP payload size; values under 512 read as 512 (RFC 6891 §6.2.5). */
  readonly udpSize: number;
  readonly version: number;
  readonly dnssecOk: boolean;
}

/** A query read straight off the wire, without a full message decode. */
export interface ParsedQuery {
  readonly id: number;
  readonly opcode: number;
  readonly rd: boolean;
  readonly cd: boolean;
  /** The question name exactly as asked, in text form (escaped where needed), with its trailing dot. */
  readonly qname: string;
  /** The canonical lookup form of qname. */
  readonly key: Fqdn;
  readonly qtype: number;
  readonly qclass: number;
  /** Offset just past the question's QCLASS; the question spans HEADER_BYTES..questionEnd. */
  readonly questionEnd: number;
  readonly edns: Edns | undefined;
  readonly raw: Buffer;
}

/** The opcode of a message whose header is readable. */
export function opcodeOf(raw: Buffer): number {
  return (raw.readUInt16BE(2) & OPCODE_MASK) >> OPCODE_SHIFT;
}

/**
 * Reads the header, the one question and any OPT record of a query. Throws QueryFormatError:
 * `headerReadable` false means drop the packet, true means answer FORMERR. Responses (QR=1)
 * are not queries and are refused with headerReadable false, so they are dropped.
 */
export function parseQuery(raw: Buffer): ParsedQuery {
  if (raw.length < HEADER_BYTES) throw new QueryFormatError('shorter than a DNS header', false);
  const flags = raw.readUInt16BE(2);
  if (flags & FLAG.QR) throw new QueryFormatError('QR is set: a response, not a query', false);
  const qdcount = raw.readUInt16BE(4);
  if (qdcount !== 1) throw new QueryFormatError(`QDCOUNT is ${qdcount}, expected 1`, true);
  const { name, end } = readQuestionName(raw);
  if (end + 4 > raw.length) throw new QueryFormatError('question runs past the end of the message', true);
  const qtype = raw.readUInt16BE(end);
  const qclass = raw.readUInt16BE(end + 2);
  const questionEnd = end + 4;
  const edns = readEdns(raw, questionEnd);
  return {
    id: raw.readUInt16BE(0),
    opcode: (flags & OPCODE_MASK) >> OPCODE_SHIFT,
    rd: (flags & FLAG.RD) !== 0,
    cd: (flags & FLAG.CD) !== 0,
    qname: name,
    key: toFqdn(name),
    qtype,
    qclass,
    questionEnd,
    edns,
    raw,
  };
}

/**
 * The question name, read in one pass: the hot path of every query. Answers are patched in place
 * with the question's bytes, so a compression pointer here is refused. A label with an octet that
 * needs an escape goes through readName.
 */
function readQuestionName(raw: Buffer): { name: string; end: number } {
  let pos = HEADER_BYTES;
  let total = 1;
  for (;;) {
    if (pos >= raw.length) throw new QueryFormatError('name runs past the end of the message', true);
    const len = raw[pos] as number;
    if (len === 0) break;
    if ((len & 0xc0) !== 0) {
      throw new QueryFormatError(
        (len & 0xc0) === 0xc0 ? 'compression pointer in the question' : 'reserved label type',
        true,
      );
    }
    if (pos + 1 + len > raw.length) throw new QueryFormatError('label runs past the end of the message', true);
    total += len + 1;
    if (total > MAX_NAME_OCTETS) throw new QueryFormatError('name longer than 255 octets', true);
    if (labelNeedsEscape(raw, pos + 1, pos + 1 + len)) return readName(raw, HEADER_BYTES);
    pos += 1 + len;
  }
  if (pos === HEADER_BYTES) return { name: '.', end: pos + 1 };
  // "\x03www\x07example\x03org\x00" → "www.example.org.": each label's length octet becomes the
  // dot after it, in a scratch buffer, then one string is made.
  raw.copy(scratch, 0, HEADER_BYTES + 1, pos + 1);
  for (let at = HEADER_BYTES; raw[at] !== 0; at += (raw[at] as number) + 1) {
    scratch[at - HEADER_BYTES + (raw[at] as number)] = 0x2e;
  }
  return { name: scratch.toString('latin1', 0, pos - HEADER_BYTES), end: pos + 1 };
}

const scratch = Buffer.alloc(256);

/**
 * The OPT record, if any. RFC 6891 §6.1.1: at most one, owned by the root, in the additional
 * section; anything else is FORMERR. Records before it are only skipped; a count larger than the
 * octets present runs out of message and is FORMERR too.
 */
function readEdns(raw: Buffer, start: number): Edns | undefined {
  const rrCount = raw.readUInt16BE(6) + raw.readUInt16BE(8);
  const arcount = raw.readUInt16BE(10);
  let pos = start;
  let edns: Edns | undefined;
  for (let i = 0; i < rrCount + arcount; i++) {
    const nameStart = pos;
    pos = skipName(raw, pos);
    if (pos + 10 > raw.length) throw new QueryFormatError('record runs past the end of the message', true);
    const type = raw.readUInt16BE(pos);
    const rdlength = raw.readUInt16BE(pos + 8);
    if (pos + 10 + rdlength > raw.length) throw new QueryFormatError('RDATA runs past the end of the message', true);
    if (type === QTYPE.OPT) {
      if (i < rrCount) throw new QueryFormatError('OPT record outside the additional section', true);
      if (edns) throw new QueryFormatError('more than one OPT record', true);
      if (raw[nameStart] !== 0) throw new QueryFormatError('OPT record owner is not the root', true);
      const ttl = raw.readUInt32BE(pos + 4);
      edns = {
        udpSize: Math.max(UDP_LEGACY_MAX_BYTES, raw.readUInt16BE(pos + 2)),
        version: (ttl >>> 16) & 0xff,
        dnssecOk: (ttl & EDNS_DO_BIT) !== 0,
      };
    }
    pos += 10 + rdlength;
  }
  return edns;
}
