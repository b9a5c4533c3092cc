import { Buffer } from 'node:buffer';
import { EDNS_DEFAULT_UDP_BYTES, EDNS_DO_BIT, HEADER_BYTES, OPT_RECORD_BYTES, QTYPE } from './constants.js';
import { QueryFormatError } from './errors.js';
import { skipName } from './names-on-wire.js';
import type { OpaqueRecord } from './records.js';

/** One EDNS0 option (RFC 6891 §6.1.2): its code and data. */
export interface EdnsOption {
  readonly code: number;
  readonly data: Buffer;
}

/**
 * Our OPT record (RFC 6891 §6.1.2): root owner, our UDP payload size, the extended rcode bits,
 * version 0, the DO bit echoed. No options but ours: `option`, or `options` (a client's unknown
 * options are never echoed; a rewrite's go upstream).
 */
export function encodeOptRecord(
  options: {
    extendedRcode?: number;
    dnssecOk?: boolean;
    udpSize?: number;
    option?: EdnsOption;
    options?: readonly EdnsOption[];
  } = {},
): Buffer {
  const list = options.option ? [options.option, ...(options.options ?? [])] : (options.options ?? []);
  let rdlength = 0;
  for (const o of list) rdlength += 4 + o.data.length;
  const out = Buffer.alloc(OPT_RECORD_BYTES + rdlength);
  out[0] = 0;
  out.writeUInt16BE(QTYPE.OPT, 1);
  out.writeUInt16BE(options.udpSize ?? EDNS_DEFAULT_UDP_BYTES, 3);
  out[5] = options.extendedRcode ?? 0;
  out[6] = 0;
  out.writeUInt16BE(options.dnssecOk ? EDNS_DO_BIT : 0, 7);
  out.writeUInt16BE(rdlength, 9);
  let at = OPT_RECORD_BYTES;
  for (const o of list) {
    out.writeUInt16BE(o.code, at);
    out.writeUInt16BE(o.data.length, at + 2);
    o.data.copy(out, at + 4);
    at += 4 + o.data.length;
  }
  return out;
}

/**
 * An OPT record carrying one option (RFC 6891 §6.1.2), as MessageWriter takes it: the option's
 * code, length and data as the record's RDATA.
 */
export function optRecordWith(code: number, data: Buffer, udpSize = EDNS_DEFAULT_UDP_BYTES): OpaqueRecord {
  return optRecordWithOptions([{ code, data }], udpSize);
}

/** An OPT record carrying these options, in this order. */
export function optRecordWithOptions(options: readonly EdnsOption[], udpSize = EDNS_DEFAULT_UDP_BYTES): OpaqueRecord {
  let length = 0;
  for (const o of options) length += 4 + o.data.length;
  const rdata = Buffer.alloc(length);
  let at = 0;
  for (const o of options) {
    rdata.writeUInt16BE(o.code, at);
    rdata.writeUInt16BE(o.data.length, at + 2);
    o.data.copy(rdata, at + 4);
    at += 4 + o.data.length;
  }
  return { name: '.', type: QTYPE.OPT, class: udpSize, ttl: 0, rdata };
}

/**
 * The data of option `code` in a message's OPT record, or undefined when it has no OPT or the OPT
 * has no such option. Reads the message's records only as far as their lengths (names skipped,
 * never followed); a malformed message throws QueryFormatError, as decodeMessage would.
 */
export function ednsOption(message: Buffer, code: number): Buffer | undefined {
  const at = optRdataOf(message);
  if (at === undefined) return undefined;
  // Options: code, length, data (RFC 6891 §6.1.2); one that runs past the record ends the walk.
  for (let pos = at.start; pos + 4 <= at.end; ) {
    const length = message.readUInt16BE(pos + 2);
    if (pos + 4 + length > at.end) return undefined;
    if (message.readUInt16BE(pos) === code) return Buffer.from(message.subarray(pos + 4, pos + 4 + length));
    pos += 4 + length;
  }
  return undefined;
}

/**
 * Every option of a message's OPT record, in order (copies); undefined when it has no OPT. An
 * option that runs past its record ends the list. Throws QueryFormatError as ednsOption does.
 */
export function ednsOptions(message: Buffer): EdnsOption[] | undefined {
  const at = optRdataOf(message);
  if (at === undefined) return undefined;
  const out: EdnsOption[] = [];
  for (let pos = at.start; pos + 4 <= at.end; ) {
    const length = message.readUInt16BE(pos + 2);
    if (pos + 4 + length > at.end) break;
    out.push({ code: message.readUInt16BE(pos), data: Buffer.from(message.subarray(pos + 4, pos + 4 + length)) });
    pos += 4 + length;
  }
  return out;
}

/** Where the RDATA of a message's OPT record lies; undefined when it has none. */
function optRdataOf(message: Buffer): { start: number; end: number } | undefined {
  if (message.length < HEADER_BYTES) return undefined;
  let pos = HEADER_BYTES;
  for (let i = message.readUInt16BE(4); i > 0; i--) pos = skipName(message, pos) + 4;
  const records = message.readUInt16BE(6) + message.readUInt16BE(8) + message.readUInt16BE(10);
  for (let i = 0; i < records; i++) {
    pos = skipName(message, pos);
    if (pos + 10 > message.length) throw new QueryFormatError('record runs past the end of the message', true);
    const type = message.readUInt16BE(pos);
    const end = pos + 10 + message.readUInt16BE(pos + 8);
    if (end > message.length) throw new QueryFormatError('record data runs past the end of the message', true);
    if (type === QTYPE.OPT) return { start: pos + 10, end };
    pos = end;
  }
  return undefined;
}
