import { Buffer } from 'node:buffer';
import { randomBytes } from 'node:crypto';
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
import { type Fqdn, ROOT, toFqdn } from './fqdn.js';
import { CANONICAL_OCTET, ESCAPED, MAX_NAME_OCTETS, readName, skipName } from './names-on-wire.js';
import { latin1Of, u16 } from './octets.js';

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
  /**
   * A 32-bit hash of the name's canonical octets (nameHashOf): what a cache can look a query up by
   * without making `key`, a string, which a cache hit need never make. Signed: an int32 is a small
   * integer to V8, a Map key it hashes inline; half of all uint32s would be heap numbers, each
   * allocated and hashed by a runtime call.
   */
  readonly nameHash: number;
  readonly qtype: number;
  readonly qclass: number;
  /** Offset just past the question's QCLASS; the question spans HEADER_BYTES..questionEnd. */
  readonly questionEnd: number;
  readonly edns: Edns | undefined;
  readonly raw: Buffer;
  /** Whether the name holds an octet that its text form escapes (a dot or a backslash in a label, a control octet). */
  readonly hasEscapes: boolean;
}

/** The opcode of a message whose header is readable. */
export function opcodeOf(raw: Buffer): number {
  return (u16(raw, 2) & OPCODE_MASK) >> OPCODE_SHIFT;
}

/**
 * FNV-1a, 32 bits, over octets [start, end) of a name on the wire, each with its 0x20 bit set: an
 * ASCII capital and its small letter hash alike, as canonical names must (RFC 4343), with no table
 * lookup per octet. Other octets that differ only in that bit collide, which costs a compare: a
 * cache checks the octets of every candidate (sameNameOctets). The offset basis is drawn at
 * start, so nobody can work out offline a set of names that all fall on one hash.
 */
export function nameHashOf(octets: Uint8Array, start: number, end: number): number {
  return nameHashWith(HASH_BASIS, octets, start, end);
}

/**
 * nameHashOf with an offset basis of the caller's: what threads that share one table must use,
 * since each thread draws its own HASH_BASIS.
 */
export function nameHashWith(basis: number, octets: Uint8Array, start: number, end: number): number {
  let hash = basis;
  for (let i = start; i < end; i++) hash = Math.imul(hash ^ ((octets[i] as number) | 0x20), FNV_PRIME);
  return hash;
}

const HASH_BASIS = randomBytes(4).readUInt32BE(0) | 0;
const FNV_PRIME = 0x01000193;

/** True when the names at `a`[start..) and `b`[start..) are the same octets but for ASCII case. */
export function sameNameOctets(a: Uint8Array, b: Uint8Array, start: number, end: number): boolean {
  return sameNameOctetsAt(a, start, b, start, end - start);
}

/** sameNameOctets for `length` octets from `aStart` in `a` and `bStart` in `b`. */
export function sameNameOctetsAt(
  a: Uint8Array,
  aStart: number,
  b: Uint8Array,
  bStart: number,
  length: number,
): boolean {
  for (let i = 0; i < length; i++) {
    const x = a[aStart + i] as number;
    const y = b[bStart + i] as number;
    // Equal, or a letter in both cases: they differ in the 0x20 bit alone and that bit set gives a-z.
    if (x !== y && ((x ^ y) !== 0x20 || ((x | 0x20) - 0x61) >>> 0 > 25)) return false;
  }
  return true;
}

/**
 * True when the query's name is `zone` or below it: its last octets are the zone's wire form (in
 * any case) starting at a label boundary. `zone` is a name's canonical wire form (lowercase,
 * wire's `writeName`). A zone check with no string made: the cluster zone is asked on every query.
 */
export function questionInZone(q: ParsedQuery, zone: Uint8Array): boolean {
  const raw = q.raw;
  const zoneStart = q.questionEnd - 4 - zone.length;
  if (zoneStart < HEADER_BYTES) return false;
  let at = HEADER_BYTES;
  while (at < zoneStart) at += (raw[at] as number) + 1;
  if (at !== zoneStart) return false;
  for (let i = 0; i < zone.length; i++) {
    const x = raw[zoneStart + i] as number;
    const y = zone[i] as number;
    // Equal, or x a capital of the small letter y.
    if (x !== y && ((x | 0x20) !== y || (y - 0x61) >>> 0 > 25)) return false;
  }
  return true;
}

const LOWER = Uint8Array.from({ length: 256 }, (_, c) => (c >= 0x41 && c <= 0x5a ? c + 0x20 : c));

/**
 * A query as read: header fields, the question's place and hash, the OPT. Its name in text form
 * (`qname`, `key`) is made only when first asked for: a cache hit never asks.
 */
class QueryView implements ParsedQuery {
  private asked: string | undefined;
  private canonical: Fqdn | undefined;
  /** Whether the name holds an octet that needs an escape in text form (then read through readName). */
  private escapedName: boolean | undefined;

  constructor(
    readonly raw: Buffer,
    readonly id: number,
    readonly opcode: number,
    readonly rd: boolean,
    readonly cd: boolean,
    readonly nameHash: number,
    readonly qtype: number,
    readonly qclass: number,
    readonly questionEnd: number,
    readonly edns: Edns | undefined,
  ) {}

  get hasEscapes(): boolean {
    this.escapedName ??= needsEscape(this.raw, this.questionEnd - 4);
    return this.escapedName;
  }

  get qname(): string {
    this.asked ??= this.hasEscapes
      ? readName(this.raw, HEADER_BYTES).name
      : nameText(this.raw, this.questionEnd - 4, false);
    return this.asked;
  }

  get key(): Fqdn {
    this.canonical ??= this.hasEscapes ? toFqdn(this.qname) : (nameText(this.raw, this.questionEnd - 4, true) as Fqdn);
    return this.canonical;
  }
}

/** The text form of a question name with no octet that needs an escape, lowercased or as asked. */
function nameText(raw: Buffer, nameEnd: number, lower: boolean): string {
  if (nameEnd === HEADER_BYTES + 1) return ROOT;
  // "\x03WWW\x07example\x03org\x00" → "www.example.org.": each length octet becomes the dot after its label.
  let length = 0;
  for (let at = HEADER_BYTES; raw[at] !== 0; ) {
    const labelEnd = at + (raw[at] as number);
    for (let i = at + 1; i <= labelEnd; i++)
      scratch[length++] = lower ? (LOWER[raw[i] as number] as number) : (raw[i] as number);
    scratch[length++] = 0x2e;
    at = labelEnd + 1;
  }
  return scratch.toString('latin1', 0, length);
}

const scratch = Buffer.alloc(256);

function needsEscape(raw: Buffer, nameEnd: number): boolean {
  for (let at = HEADER_BYTES; at < nameEnd - 1; ) {
    const labelEnd = at + (raw[at] as number);
    for (let i = at + 1; i <= labelEnd; i++) if (CANONICAL_OCTET[raw[i] as number] === ESCAPED) return true;
    at = labelEnd + 1;
  }
  return false;
}

/**
 * Reads the header, the one question and any OPT record of a query. Throws QueryFormatError:
 * `headerReadable` false means drop the packet, true means answer FORMERR. Responses (QR=1)
 * are not queries and are refused with headerReadable false, so they are dropped.
 */
export function parseQuery(raw: Buffer): ParsedQuery {
  if (raw.length < HEADER_BYTES) throw new QueryFormatError('shorter than a DNS header', false);
  const flags = u16(raw, 2);
  if (flags & FLAG.QR) throw new QueryFormatError('QR is set: a response, not a query', false);
  const qdcount = u16(raw, 4);
  if (qdcount !== 1) throw new QueryFormatError(`QDCOUNT is ${qdcount}, expected 1`, true);
  const end = walkQuestionName(raw);
  if (end < 0) throw new QueryFormatError(NAME_PROBLEMS[-end - 1] as string, true);
  if (end + 4 > raw.length) throw new QueryFormatError('question runs past the end of the message', true);
  const questionEnd = end + 4;
  return new QueryView(
    raw,
    u16(raw, 0),
    (flags & OPCODE_MASK) >> OPCODE_SHIFT,
    (flags & FLAG.RD) !== 0,
    (flags & FLAG.CD) !== 0,
    nameHashOf(raw, HEADER_BYTES, end),
    u16(raw, end),
    u16(raw, end + 2),
    questionEnd,
    readEdns(raw, questionEnd),
  );
}

/** What walkQuestionName's negative results mean: -1 is the first. */
const NAME_PROBLEMS = [
  'name runs past the end of the message',
  'compression pointer in the question',
  'reserved label type',
  'label runs past the end of the message',
  'name longer than 255 octets',
];

/**
 * The question's name checked label by label, its octets untouched: every label inside the
 * message, no compression pointer (the question is patched into answers in place) or reserved
 * label type, 255 octets at most. Returns the offset past the root label, or -(1 + a
 * NAME_PROBLEMS index).
 */
function walkQuestionName(raw: Buffer): number {
  let pos = HEADER_BYTES;
  for (;;) {
    if (pos >= raw.length) return -1;
    const len = raw[pos] as number;
    if (len === 0) break;
    if ((len & 0xc0) !== 0) return (len & 0xc0) === 0xc0 ? -2 : -3;
    const labelEnd = pos + 1 + len;
    if (labelEnd > raw.length) return -4;
    if (labelEnd - HEADER_BYTES + 1 > MAX_NAME_OCTETS) return -5;
    pos = labelEnd;
  }
  return pos + 1;
}

/**
 * A message's question (name, type and class, HEADER_BYTES..questionEnd) as one latin1 string: the
 * key a cache keeps a template under (its canonical question) and the key an express lane looks a
 * query up by (its question as asked). One function for both, so the two always match.
 */
export function questionOctetsOf(message: Uint8Array, questionEnd: number): string {
  return latin1Of(message, HEADER_BYTES, questionEnd);
}

/**
 * A plain query's question and EDNS as readPlainQuery left them. One is kept by its caller and
 * filled again for each query, so reading one makes no object.
 */
export class PlainQuestion {
  /** Offset just past QCLASS; the name ends 4 octets before. */
  questionEnd = 0;
  qtype = 0;
  qclass = 0;
  /** The asker's EDNS payload size (512 at least), or 0 when the query has no OPT. */
  ednsUdpSize = 0;
  dnssecOk = false;
}

/**
 * Reads the commonest query there is in one pass, for an express lane that answers it before the
 * query pipeline (a cache hit): opcode QUERY, QR clear, one question with a well-formed name, no
 * answer or authority records, and at most an OPT of EDNS version 0 owned by the root. Anything
 * else — malformed, another opcode, a response, more records — returns false and goes the whole
 * way through the pipeline, whose checks (RFC 8906's order, FORMERR, BADVERS) stay the only ones
 * that answer it. The name is checked by the same function as parseQuery's, and not hashed: the
 * caller looks it up by its octets.
 */
export function readPlainQuery(raw: Buffer, into: PlainQuestion): boolean {
  // Header and the shortest question (the root, type, class).
  if (raw.length < HEADER_BYTES + 5) return false;
  // QR clear and opcode 0: the top five bits of the third octet.
  if (((raw[2] as number) & 0xf8) !== 0) return false;
  if (raw[4] !== 0 || raw[5] !== 1 || raw[6] !== 0 || raw[7] !== 0 || raw[8] !== 0 || raw[9] !== 0) return false;
  if (raw[10] !== 0 || (raw[11] as number) > 1) return false;
  const end = walkQuestionName(raw);
  if (end < 0 || end + 4 > raw.length) return false;
  const questionEnd = end + 4;
  into.questionEnd = questionEnd;
  into.qtype = u16(raw, end);
  into.qclass = u16(raw, end + 2);
  into.ednsUdpSize = 0;
  into.dnssecOk = false;
  if (raw[11] === 0) return true;
  // The one additional record: an OPT (root owner, type 41) with its RDATA inside the message.
  if (raw[questionEnd] !== 0) return false;
  const type = questionEnd + 1;
  if (type + 10 > raw.length || u16(raw, type) !== QTYPE.OPT || type + 10 + u16(raw, type + 8) > raw.length)
    return false;
  // Version 0 only: a higher one gets BADVERS from the pipeline.
  if (optVersion(raw, type) !== 0) return false;
  into.ednsUdpSize = optUdpSize(raw, type);
  into.dnssecOk = optDnssecOk(raw, type);
  return true;
}

/**
 * The OPT record, if any. RFC 6891 §6.1.1: at most one, owned by the root, in the additional
 * section; anything else is FORMERR. Records before it are only skipped; a count larger than the
 * octets present runs out of message and is FORMERR too.
 */
function readEdns(raw: Buffer, start: number): Edns | undefined {
  const rrCount = u16(raw, 6) + u16(raw, 8);
  const arcount = u16(raw, 10);
  let pos = start;
  let edns: Edns | undefined;
  for (let i = 0; i < rrCount + arcount; i++) {
    const nameStart = pos;
    pos = skipName(raw, pos);
    if (pos + 10 > raw.length) throw new QueryFormatError('record runs past the end of the message', true);
    const type = u16(raw, pos);
    const rdlength = u16(raw, pos + 8);
    if (pos + 10 + rdlength > raw.length) throw new QueryFormatError('RDATA runs past the end of the message', true);
    if (type === QTYPE.OPT) {
      if (i < rrCount) throw new QueryFormatError('OPT record outside the additional section', true);
      if (edns) throw new QueryFormatError('more than one OPT record', true);
      if (raw[nameStart] !== 0) throw new QueryFormatError('OPT record owner is not the root', true);
      edns = { udpSize: optUdpSize(raw, pos), version: optVersion(raw, pos), dnssecOk: optDnssecOk(raw, pos) };
    }
    pos += 10 + rdlength;
  }
  return edns;
}

// An OPT record's fields (RFC 6891 §6.1.2), by the offset of its TYPE: the requestor's payload size
// in CLASS (under 512 reads as 512, §6.2.5), then in the TTL the extended rcode, the version, and
// the DO bit at the top of the flags.
function optUdpSize(raw: Buffer, type: number): number {
  return Math.max(UDP_LEGACY_MAX_BYTES, u16(raw, type + 2));
}

function optVersion(raw: Buffer, type: number): number {
  return raw[type + 5] as number;
}

function optDnssecOk(raw: Buffer, type: number): boolean {
  return ((raw[type + 6] as number) & (EDNS_DO_BIT >>> 8)) !== 0;
}
