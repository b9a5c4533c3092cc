import { Buffer } from 'node:buffer';
import { FLAG, HEADER_BYTES, QTYPE } from './constants.js';
import { readName, writeName } from './names-on-wire.js';
import { type ScannedRecord, type ScannedResponse, scanResponse } from './response-scan.js';

/** Octets of RDATA before the embedded name(s), for the types whose RDATA may be compressed. */
const NAME_AFTER: Partial<Record<number, number>> = {
  [QTYPE.NS]: 0,
  [QTYPE.CNAME]: 0,
  [QTYPE.PTR]: 0,
  [QTYPE.MX]: 2,
  [QTYPE.SRV]: 6,
};

/** The name a record's data points at (NS, CNAME, PTR, MX and SRV), or undefined for other types. */
export function recordTarget(msg: Buffer, record: ScannedRecord): string | undefined {
  const prefix = NAME_AFTER[record.type];
  return prefix === undefined ? undefined : readName(msg, record.rdataOffset + prefix).name;
}

/**
 * One record of `msg` as octets that can stand in any other message: its owner and the names in
 * its data written out in full, its data otherwise copied as is. Only the well-known types of RFC
 * 1035 (and SRV, which some servers compress anyway) may hold compressed names (RFC 3597 §4), so
 * every other type's data is position-independent already.
 */
export function copyRecord(msg: Buffer, record: ScannedRecord): Buffer {
  const owner = writeName(readName(msg, record.start).name);
  const fixed = msg.subarray(record.ttlOffset - 4, record.ttlOffset + 4);
  let rdata: Buffer;
  const prefix = NAME_AFTER[record.type];
  if (prefix !== undefined) {
    const name = writeName(readName(msg, record.rdataOffset + prefix).name);
    rdata = Buffer.concat([msg.subarray(record.rdataOffset, record.rdataOffset + prefix), name]);
  } else if (record.type === QTYPE.SOA) {
    const primary = readName(msg, record.rdataOffset);
    const admin = readName(msg, primary.end);
    rdata = Buffer.concat([writeName(primary.name), writeName(admin.name), msg.subarray(admin.end, admin.end + 20)]);
  } else {
    rdata = msg.subarray(record.rdataOffset, record.end);
  }
  const length = Buffer.alloc(2);
  length.writeUInt16BE(rdata.length, 0);
  return Buffer.concat([owner, fixed, length, rdata]);
}

/**
 * A reply assembled from parts: the header's ID and flags, the question's octets, and the
 * records of each section as copyRecord gives them. The counts are set from the parts.
 */
export function assembleReply(
  header: { id: number; flags: number },
  question: Buffer,
  sections: readonly [readonly Buffer[], readonly Buffer[], readonly Buffer[]],
): Buffer {
  const head = Buffer.alloc(HEADER_BYTES);
  head.writeUInt16BE(header.id, 0);
  head.writeUInt16BE(header.flags | FLAG.QR, 2);
  head.writeUInt16BE(question.length > 0 ? 1 : 0, 4);
  head.writeUInt16BE(sections[0].length, 6);
  head.writeUInt16BE(sections[1].length, 8);
  head.writeUInt16BE(sections[2].length, 10);
  return Buffer.concat([head, question, ...sections[0], ...sections[1], ...sections[2]]);
}

/**
 * A copy of the reply without its OPT record, its scan still right for it: what a forwarder keeps
 * of an upstream's reply, after one walk. The OPT is last in most replies; records that follow it
 * (RFC 6891 lets it stand anywhere in the additional section) are kept, copied with their names
 * spelt out, since a compression pointer among them could point past the OPT's place.
 */
export function copyWithoutOpt(msg: Buffer, scanned: ScannedResponse): { wire: Buffer; scanned: ScannedResponse } {
  const opt = scanned.opt;
  if (!opt) return { wire: Buffer.from(msg), scanned };
  const after = scanned.records.filter((r) => r.start > opt.start);
  if (after.length === 0) {
    const wire = Buffer.allocUnsafe(opt.start);
    msg.copy(wire, 0, 0, opt.start);
    wire.writeUInt16BE(msg.readUInt16BE(10) - 1, 10);
    return { wire, scanned: { ...scanned, opt: undefined } };
  }
  const wire = Buffer.concat([msg.subarray(0, opt.start), ...after.map((r) => copyRecord(msg, r))]);
  wire.writeUInt16BE(msg.readUInt16BE(10) - 1, 10);
  return { wire, scanned: scanResponse(wire) };
}
