import type { Buffer } from 'node:buffer';
import { FLAG, HEADER_BYTES, QTYPE } from './constants.js';
import { assembleReply, copyRecord } from './record-copy.js';
import type { ScannedRecord, ScannedResponse } from './response-scan.js';

// RFC 8482: an ANY query gets one RRset, not every RRset at the name. ANY is the query that asks
// the fewest octets for the most, the one a spoofed reflection wants; no client of a cluster DNS
// needs it to enumerate a name, and resolvers have stopped relying on it (RFC 8482 §1).

/** RRset types in the order an ANY answer picks one: the address first, what an asker most likely wants. */
export const ANY_PREFERENCE: readonly number[] = [
  QTYPE.CNAME,
  QTYPE.A,
  QTYPE.AAAA,
  QTYPE.SRV,
  QTYPE.PTR,
  QTYPE.TXT,
  QTYPE.MX,
  QTYPE.SOA,
  QTYPE.NS,
];

/** The type of the one RRset an ANY answer keeps, among the types present (in answer order otherwise). */
export function anyAnswerType(types: readonly number[]): number | undefined {
  for (const type of ANY_PREFERENCE) if (types.includes(type)) return type;
  return types.find((t) => t !== QTYPE.RRSIG) ?? types[0];
}

/** The type an RRSIG covers: the first two octets of its data. */
const coveredBy = (msg: Buffer, r: ScannedRecord) => msg.readUInt16BE(r.rdataOffset);

/**
 * A reply to ANY cut down to one RRset of its answer section (with the RRSIGs that cover it), and
 * no authority or additional records; the same reply when there is nothing to cut (no answers,
 * or one RRset already). The header's flags and rcode are kept.
 */
export function minimalAnyReply(msg: Buffer, scanned: ScannedResponse): Buffer {
  const answers = scanned.records.filter((r) => r.section === 'answer');
  const others = scanned.records.filter((r) => r.section !== 'answer' && r !== scanned.opt);
  const type = anyAnswerType(answers.map((r) => (r.type === QTYPE.RRSIG ? coveredBy(msg, r) : r.type)));
  const kept = answers.filter((r) => (r.type === QTYPE.RRSIG ? coveredBy(msg, r) : r.type) === type);
  if (kept.length === answers.length && others.length === 0) return msg;
  return assembleReply(
    { id: msg.readUInt16BE(0), flags: msg.readUInt16BE(2) & ~FLAG.QR },
    msg.subarray(HEADER_BYTES, scanned.questionEnd),
    [kept.map((r) => copyRecord(msg, r)), [], []],
  );
}
