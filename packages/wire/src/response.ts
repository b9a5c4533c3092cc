import { HEADER_BYTES, RCODE, TCP_MAX_BYTES, UDP_LEGACY_MAX_BYTES } from './constants.js';
import { encodeOptRecord } from './opt-record.js';
import type { ParsedQuery } from './query.js';

export type Transport = 'udp' | 'tcp';

const QR = 0x8000;
const AA = 0x0400;
const TC = 0x0200;
const RD = 0x0100;
const RA = 0x0080;
const CD = 0x0010;

/** The largest reply this client can take: its EDNS0 size over UDP (at least 512), 64 KiB over TCP. */
export function maxResponseBytes(query: ParsedQuery, transport: Transport): number {
  if (transport === 'tcp') return TCP_MAX_BYTES;
  return query.edns ? Math.min(query.edns.udpSize, TCP_MAX_BYTES) : UDP_LEGACY_MAX_BYTES;
}

export interface BareResponseOptions {
  authoritative?: boolean;
  recursionAvailable?: boolean;
  truncated?: boolean;
}

/**
 * Header and question only, with an OPT record when the query had one. Serves error rcodes,
 * truncated replies and NOTIMP. Rcodes above 15 (BADVERS) go partly into the OPT record.
 */
export function buildBareResponse(query: ParsedQuery, rcode: number, options: BareResponseOptions = {}): Buffer {
  const opt = query.edns ? encodeOptRecord({ extendedRcode: rcode >> 4, dnssecOk: query.edns.dnssecOk }) : undefined;
  const out = Buffer.alloc(query.questionEnd + (opt?.length ?? 0));
  query.raw.copy(out, 0, 0, query.questionEnd);
  let flags = QR | (query.opcode << 11) | (rcode & 0xf);
  if (query.rd) flags |= RD;
  if (query.cd) flags |= CD;
  if (options.authoritative) flags |= AA;
  if (options.recursionAvailable) flags |= RA;
  if (options.truncated) flags |= TC;
  out.writeUInt16BE(flags, 2);
  out.writeUInt16BE(1, 4);
  out.writeUInt32BE(0, 6);
  out.writeUInt16BE(opt ? 1 : 0, 10);
  opt?.copy(out, query.questionEnd);
  return out;
}

/**
 * FORMERR for a packet whose header could be read but nothing else: the ID and opcode echoed,
 * no question (RFC 1035 §4.1.1 allows it, and the question may be what was malformed).
 */
export function buildFormatErrorResponse(raw: Buffer): Buffer | undefined {
  if (raw.length < HEADER_BYTES) return undefined;
  const out = Buffer.alloc(HEADER_BYTES);
  out.writeUInt16BE(raw.readUInt16BE(0), 0);
  const flags = raw.readUInt16BE(2);
  out.writeUInt16BE(QR | (flags & 0x7800) | (flags & RD) | RCODE.FORMERR, 2);
  return out;
}

export interface TemplatePatch {
  /** Offsets of TTL fields to overwrite with `ttlSeconds` (a cache's remaining time). */
  ttlOffsets?: readonly number[];
  ttlSeconds?: number;
  /** Clear AA: an answer from a cache is not authoritative. */
  clearAuthoritative?: boolean;
}

/**
 * Turns a precomputed reply (ID 0, question in canonical case, no OPT) into the reply to this
 * query: its ID, RD and CD bits, the question's case as asked, an OPT when the query had one,
 * and TC with an empty body when it is bigger than `limitBytes`. No decode, no encode.
 */
export function finishFromTemplate(
  template: Buffer,
  query: ParsedQuery,
  limitBytes: number,
  patch?: TemplatePatch,
): Buffer {
  const opt = query.edns ? encodeOptRecord({ dnssecOk: query.edns.dnssecOk }) : undefined;
  const size = template.length + (opt?.length ?? 0);
  if (size > limitBytes) {
    const flags = template.readUInt16BE(2);
    return buildBareResponse(query, flags & 0xf, {
      authoritative: (flags & AA) !== 0 && !patch?.clearAuthoritative,
      recursionAvailable: (flags & RA) !== 0,
      truncated: true,
    });
  }
  const out = Buffer.allocUnsafe(size);
  template.copy(out);
  out.writeUInt16BE(query.id, 0);
  let flags = template.readUInt16BE(2) & ~(RD | CD);
  if (query.rd) flags |= RD;
  if (query.cd) flags |= CD;
  if (patch?.clearAuthoritative) flags &= ~AA;
  out.writeUInt16BE(flags, 2);
  if (patch?.ttlOffsets && patch.ttlSeconds !== undefined) {
    for (const offset of patch.ttlOffsets) out.writeUInt32BE(patch.ttlSeconds, offset);
  }
  // Same name, same length: copy the asker's spelling over the canonical one (0x20 echo).
  query.raw.copy(out, HEADER_BYTES, HEADER_BYTES, query.questionEnd - 4);
  if (opt) {
    opt.copy(out, template.length);
    out.writeUInt16BE(out.readUInt16BE(10) + 1, 10);
  }
  return out;
}
