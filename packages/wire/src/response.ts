import { Buffer } from 'node:buffer';
import {
  EDNS_DEFAULT_UDP_BYTES,
  FLAG,
  HEADER_BYTES,
  OPCODE_MASK,
  OPCODE_SHIFT,
  OPT_RECORD_BYTES,
  RCODE_MASK,
  TCP_MAX_BYTES,
  UDP_LEGACY_MAX_BYTES,
} from './constants.js';
import { putU16, putU32, u16 } from './octets.js';
import { encodeOptRecord } from './opt-record.js';
import type { ParsedQuery, PlainQuestion } from './query.js';
import { truncateReply } from './truncate.js';

export type Transport = 'udp' | 'tcp';

/**
 * The largest reply this client can take: over UDP its EDNS0 size capped by ours (512 without
 * EDNS0, RFC 1035 §4.2.1), over TCP 64 KiB.
 */
export function maxResponseBytes(
  query: ParsedQuery,
  transport: Transport,
  udpPayloadBytes: number = EDNS_DEFAULT_UDP_BYTES,
): number {
  if (transport === 'tcp') return TCP_MAX_BYTES;
  return udpLimitBytes(query.edns?.udpSize ?? 0, udpPayloadBytes);
}

/** maxResponseBytes over UDP, from the asker's EDNS payload size (0 without EDNS). */
export function udpLimitBytes(ednsUdpSize: number, udpPayloadBytes: number): number {
  return ednsUdpSize === 0
    ? UDP_LEGACY_MAX_BYTES
    : Math.max(UDP_LEGACY_MAX_BYTES, Math.min(ednsUdpSize, udpPayloadBytes));
}

export interface BareResponseOptions {
  authoritative?: boolean;
  recursionAvailable?: boolean;
  truncated?: boolean;
  /** The UDP payload size our OPT advertises. */
  udpPayloadBytes?: number;
}

/** Our OPT records without an extended rcode, by payload size and DO bit: made once, copied into replies. */
const plainOpts = new Map<number, Buffer>();

/** Our OPT for a reply to this query (none when the query had none, RFC 6891 §7), or undefined. */
function optFor(query: ParsedQuery, udpPayloadBytes: number | undefined, rcode = 0): Buffer | undefined {
  if (!query.edns) return undefined;
  const udpSize = udpPayloadBytes ?? EDNS_DEFAULT_UDP_BYTES;
  const dnssecOk = query.edns.dnssecOk;
  if (rcode >> 4 !== 0) return encodeOptRecord({ extendedRcode: rcode >> 4, dnssecOk, udpSize });
  return plainOpt(udpSize, dnssecOk);
}

/** Our OPT record advertising `udpSize`, with the DO bit echoed and no extended rcode: made once, shared. */
function plainOpt(udpSize: number, dnssecOk: boolean): Buffer {
  const slot = udpSize * 2 + (dnssecOk ? 1 : 0);
  let opt = plainOpts.get(slot);
  if (!opt) {
    opt = encodeOptRecord({ dnssecOk, udpSize });
    if (plainOpts.size < 64) plainOpts.set(slot, opt);
  }
  return opt;
}

/**
 * Header and question only, with an OPT record when the query had one. Serves error rcodes and
 * NOTIMP. Rcodes above 15 (BADVERS) go partly into the OPT record.
 */
export function buildBareResponse(query: ParsedQuery, rcode: number, options: BareResponseOptions = {}): Buffer {
  const opt = optFor(query, options.udpPayloadBytes, rcode);
  const out = Buffer.alloc(query.questionEnd + (opt?.length ?? 0));
  query.raw.copy(out, 0, 0, query.questionEnd);
  let flags = FLAG.QR | (query.opcode << OPCODE_SHIFT) | (rcode & RCODE_MASK);
  if (query.rd) flags |= FLAG.RD;
  if (query.cd) flags |= FLAG.CD;
  if (options.authoritative) flags |= FLAG.AA;
  if (options.recursionAvailable) flags |= FLAG.RA;
  if (options.truncated) flags |= FLAG.TC;
  out.writeUInt16BE(flags, 2);
  out.writeUInt16BE(1, 4);
  out.writeUInt32BE(0, 6);
  out.writeUInt16BE(opt ? 1 : 0, 10);
  opt?.copy(out, query.questionEnd);
  return out;
}

/**
 * A header-only reply with this rcode for a message whose header could be read but not the rest:
 * the ID and opcode echoed, no question (RFC 1035 §4.1.1 allows it, and the question may be what
 * was malformed). FORMERR for bad questions, NOTIMP for unknown opcodes.
 */
export function buildHeaderOnlyResponse(raw: Buffer, rcode: number): Buffer | undefined {
  if (raw.length < HEADER_BYTES) return undefined;
  const out = Buffer.alloc(HEADER_BYTES);
  out.writeUInt16BE(raw.readUInt16BE(0), 0);
  const flags = raw.readUInt16BE(2);
  out.writeUInt16BE(FLAG.QR | (flags & OPCODE_MASK) | (flags & FLAG.RD) | (rcode & RCODE_MASK), 2);
  return out;
}

const RD_OCTET = FLAG.RD >> 8;
const CD_OCTET = FLAG.CD;

export interface TemplatePatch {
  /** Offsets of TTL fields to overwrite with `ttlSeconds` (a cache's remaining time). */
  ttlOffsets?: readonly number[];
  ttlSeconds?: number;
  /** The UDP payload size our OPT advertises. */
  udpPayloadBytes?: number;
  /** An EDNS0 option for our OPT (only when the query has one): a reply meant for one client says so. */
  option?: { code: number; data: Buffer };
}

/**
 * Turns a precomputed reply (ID 0, question in canonical case, no OPT) into the reply to this
 * query: its ID, RD and CD bits, the question's case as asked, an OPT when the query had one, and
 * — when it is bigger than `limitBytes` — every whole record that fits, with TC. One copy.
 */
export function finishFromTemplate(
  template: Buffer,
  query: ParsedQuery,
  limitBytes: number,
  patch?: TemplatePatch,
): Buffer {
  return patchTemplate(
    template,
    query.raw,
    query.questionEnd,
    limitBytes,
    query.edns === undefined
      ? undefined
      : patch?.option === undefined
        ? optFor(query, patch?.udpPayloadBytes)
        : encodeOptRecord({
            dnssecOk: query.edns.dnssecOk,
            udpSize: patch.udpPayloadBytes ?? EDNS_DEFAULT_UDP_BYTES,
            option: patch.option,
          }),
    patch?.ttlSeconds === undefined ? undefined : patch.ttlOffsets,
    patch?.ttlSeconds ?? 0,
  );
}

/**
 * finishFromTemplate for a plain query (readPlainQuery) whose template was found by the query's
 * own question octets (questionOctetsOf), as the express lanes find theirs: the limit and OPT from
 * its EDNS, and the name left as the template spells it, which is as asked. `ttlOffsets` set to
 * `ttlSeconds` as in TemplatePatch. `askedCase` true copies the asker's spelling of the name over
 * the template's, for a template found by the name in any case.
 */
export function answerPlainQuery(
  template: Buffer,
  raw: Buffer,
  question: PlainQuestion,
  udpPayloadBytes: number,
  ttlOffsets?: readonly number[],
  ttlSeconds = 0,
  askedCase = false,
): Buffer {
  const edns = question.ednsUdpSize !== 0;
  return patchTemplate(
    template,
    raw,
    question.questionEnd,
    udpLimitBytes(question.ednsUdpSize, udpPayloadBytes),
    edns ? plainOpt(udpPayloadBytes, question.dnssecOk) : undefined,
    ttlOffsets,
    ttlSeconds,
    askedCase,
  );
}

/**
 * The body of finishFromTemplate and answerPlainQuery, from the query's octets: `raw` is the query,
 * its question ending at `questionEnd`; `opt` the OPT to append (plainOpt) or undefined;
 * `ttlOffsets` the TTL fields to set to `ttlSeconds`, or undefined to leave the template's.
 * `copyName` false skips copying the asker's spelling of the name, for a caller that found the
 * template by the very same octets.
 */
function patchTemplate(
  template: Buffer,
  raw: Buffer,
  questionEnd: number,
  limitBytes: number,
  opt: Buffer | undefined,
  ttlOffsets: readonly number[] | undefined,
  ttlSeconds: number,
  copyName = true,
): Buffer {
  const optBytes = opt === undefined ? 0 : opt.length;
  const body = template.length + optBytes > limitBytes ? truncateReply(template, limitBytes - optBytes) : template;
  const bodyBytes = body.length;
  const out = Buffer.allocUnsafe(bodyBytes + optBytes);
  // Whole-buffer copies only (TypedArray#set, not Buffer#copy's checks around it), and the few
  // octets that change by hand: a copy of a part makes a typed-array view per call.
  out.set(body);
  out[0] = raw[0] as number;
  out[1] = raw[1] as number;
  // RD and CD are the asker's: RD is the top octet's low bit, CD a bit of the low octet.
  out[2] = ((body[2] as number) & ~RD_OCTET) | ((raw[2] as number) & RD_OCTET);
  out[3] = ((body[3] as number) & ~CD_OCTET) | ((raw[3] as number) & CD_OCTET);
  if (ttlOffsets !== undefined) {
    for (let i = 0; i < ttlOffsets.length; i++) {
      const offset = ttlOffsets[i] as number;
      if (offset + 4 <= bodyBytes) putU32(out, ttlSeconds, offset);
    }
  }
  // Same name, same length: the asker's spelling over the canonical one (0x20 echo).
  if (copyName) for (let i = HEADER_BYTES, end = questionEnd - 4; i < end; i++) out[i] = raw[i] as number;
  if (opt !== undefined) {
    for (let i = 0; i < optBytes; i++) out[bodyBytes + i] = opt[i] as number;
    putU16(out, u16(out, 10) + 1, 10);
  }
  return out;
}

/**
 * A reply with no records for a plain query (readPlainQuery): the header with `rcode` (and TC when
 * `truncated`), the question as asked, and our OPT if the query had one. What a door answers
 * before the pipeline (a client over its rate: REFUSED, or TC so that it asks again over TCP),
 * made from the query's octets without parsing it.
 */
export function answerPlainRefusal(
  raw: Buffer,
  question: PlainQuestion,
  rcode: number,
  options: { truncated?: boolean; recursionAvailable?: boolean; udpPayloadBytes: number },
): Buffer {
  const opt = question.ednsUdpSize !== 0 ? plainOpt(options.udpPayloadBytes, question.dnssecOk) : undefined;
  const end = question.questionEnd;
  const out = Buffer.allocUnsafe(end + (opt === undefined ? 0 : OPT_RECORD_BYTES));
  out.set(raw.subarray(0, end));
  let flags = FLAG.QR | (u16(raw, 2) & (FLAG.RD | FLAG.CD)) | (rcode & RCODE_MASK);
  if (options.truncated) flags |= FLAG.TC;
  if (options.recursionAvailable) flags |= FLAG.RA;
  putU16(out, flags, 2);
  putU16(out, 1, 4);
  putU32(out, 0, 6);
  putU16(out, opt === undefined ? 0 : 1, 10);
  if (opt !== undefined) out.set(opt, end);
  return out;
}
