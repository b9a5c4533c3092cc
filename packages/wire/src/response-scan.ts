import type { Buffer } from 'node:buffer';
import { FLAG, HEADER_BYTES, QTYPE, RCODE, RCODE_MASK } from './constants.js';
import { QueryFormatError } from './errors.js';
import { type Fqdn, toFqdn } from './fqdn.js';
import { readName, skipName } from './names-on-wire.js';
import { wireTtl } from './wire-ttl.js';

export interface ScannedRecord {
  readonly section: 'answer' | 'authority' | 'additional';
  readonly type: number;
  /** Offset of the record's owner name. */
  readonly start: number;
  /** Offset of its 32-bit TTL. */
  readonly ttlOffset: number;
  readonly ttl: number;
  /** Offset just past its RDATA. */
  readonly end: number;
  readonly rdataOffset: number;
}

export interface ScannedResponse {
  readonly id: number;
  readonly flags: number;
  readonly rcode: number;
  readonly truncated: boolean;
  readonly questionEnd: number;
  readonly answerCount: number;
  readonly records: readonly ScannedRecord[];
  /** The OPT record, if any: it is per hop and never cached. */
  readonly opt: ScannedRecord | undefined;
}

/**
 * Walks a reply's records without decoding their data: where each TTL is, what type each record
 * is, and where the OPT record sits. What a cache needs to age TTLs in place. Throws
 * QueryFormatError on a reply that runs past its end.
 */
export function scanResponse(msg: Buffer): ScannedResponse {
  if (msg.length < HEADER_BYTES) throw new QueryFormatError('reply shorter than a header', false);
  const flags = msg.readUInt16BE(2);
  const qdcount = msg.readUInt16BE(4);
  const counts = [msg.readUInt16BE(6), msg.readUInt16BE(8), msg.readUInt16BE(10)] as const;
  let pos = HEADER_BYTES;
  for (let i = 0; i < qdcount; i++) pos = skipName(msg, pos) + 4;
  if (pos > msg.length) throw new QueryFormatError('question runs past the end', true);
  const questionEnd = pos;
  const records: ScannedRecord[] = [];
  let opt: ScannedRecord | undefined;
  const sections = ['answer', 'authority', 'additional'] as const;
  for (let s = 0; s < 3; s++) {
    for (let i = 0; i < (counts[s] as number); i++) {
      const start = pos;
      pos = skipName(msg, pos);
      if (pos + 10 > msg.length) throw new QueryFormatError('record runs past the end', true);
      const type = msg.readUInt16BE(pos);
      const ttlOffset = pos + 4;
      const rdlength = msg.readUInt16BE(pos + 8);
      const rdataOffset = pos + 10;
      pos = rdataOffset + rdlength;
      if (pos > msg.length) throw new QueryFormatError('RDATA runs past the end', true);
      const record: ScannedRecord = {
        section: sections[s] as ScannedRecord['section'],
        type,
        start,
        ttlOffset,
        ttl: wireTtl(msg, ttlOffset, type),
        end: pos,
        rdataOffset,
      };
      if (type === QTYPE.OPT && s === 2) opt = record;
      else records.push(record);
    }
  }
  return {
    id: msg.readUInt16BE(0),
    flags,
    rcode: flags & RCODE_MASK,
    truncated: (flags & FLAG.TC) !== 0,
    questionEnd,
    answerCount: counts[0],
    records,
    opt,
  };
}

/**
 * The zone an authoritative denial speaks for: the owner of the SOA in its authority section
 * (RFC 2308 §3), lowercased; undefined when the reply is not an authoritative NXDOMAIN with one.
 * A forwarder that would ask elsewhere after a denial asks this first: a server that names a zone
 * narrower than the one it was asked for owns that zone, and its denial stands.
 */
export function deniedZoneOf(msg: Buffer, scanned: ScannedResponse): Fqdn | undefined {
  if (scanned.rcode !== RCODE.NXDOMAIN || (scanned.flags & FLAG.AA) === 0) return undefined;
  const soa = scanned.records.find((r) => r.section === 'authority' && r.type === QTYPE.SOA);
  return soa ? toFqdn(readName(msg, soa.start).name) : undefined;
}
