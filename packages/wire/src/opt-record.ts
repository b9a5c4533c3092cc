import { Buffer } from 'node:buffer';
import { EDNS_DEFAULT_UDP_BYTES, EDNS_DO_BIT, HEADER_BYTES, OPT_RECORD_BYTES, QTYPE } from './constants.js';
import { QueryFormatError } from './errors.js';
import { skipName } from './names-on-wire.js';
import type { OpaqueRecord } from './records.js';

/**
 * Our OPT record (RFC 6891 §6.1.2): root owner, our UDP payload size, the extended rcode bits,
 * version 0, the DO bit echoed. No options but `option`, one of ours (a client's unknown options
 * are never echoed).
 */
export function encodeOptRecord(
  options: {
    extendedRcode?: number;
    dnssecOk?: boolean;
    udpSize?: number;
    option?: { code: number; data: Buffer };
  } = {},
): Buffer {
  const { option } = options;
  const out = Buffer.alloc(OPT_RECORD_BYTES + (option ? 4 + option.data.length : 0));
  if (option) {
    out.writeUInt16BE(4 + option.data.length, 9);
    out.writeUInt16BE(option.code, OPT_RECORD_BYTES);
    out.writeUInt16BE(option.data.length, OPT_RECORD_BYTES + 2);
    option.data.copy(out, OPT_RECORD_BYTES + 4);
  }
  out[0] = 0;
  out.writeUInt16BE(QTYPE.OPT, 1);
  out.writeUInt16BE(options.udpSize ?? EDNS_DEFAULT_UDP_BYTES, 3);
  out[5] = options.extendedRcode ?? 0;
  out[6] = 0;
  out.writeUInt16BE(options.dnssecOk ? EDNS_DO_BIT : 0, 7);
  if (!option) out.writeUInt16BE(0, 9);
  return out;
}

/**
 * An OPT record carrying one option (RFC 6891 §6.1.2), as MessageWriter takes it: the option's
 * code, length and data as the record's RDATA.
 */
export function optRecordWith(code: number, data: Buffer, udpSize = EDNS_DEFAULT_UDP_BYTES): OpaqueRecord {
  const rdata = Buffer.alloc(4 + data.length);
  rdata.writeUInt16BE(code, 0);
  rdata.writeUInt16BE(data.length, 2);
  data.copy(rdata, 4);
  return { name: '.', type: QTYPE.OPT, class: udpSize, ttl: 0, rdata };
}

/**
 * The data of option `code` in a message's OPT record, or undefined when it has no OPT or the OPT
 * has no such option. Reads the message's records only as far as their lengths (names skipped,
 * never followed); a malformed message throws QueryFormatError, as decodeMessage would.
 */
export function ednsOption(message: Buffer, code: number): Buffer | undefined {
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
    if (type === QTYPE.OPT) {
      // Options: code, length, data (RFC 6891 §6.1.2); one that runs past the record ends the walk.
      for (let at = pos + 10; at + 4 <= end; ) {
        const length = message.readUInt16BE(at + 2);
        if (at + 4 + length > end) return undefined;
        if (message.readUInt16BE(at) === code) return Buffer.from(message.subarray(at + 4, at + 4 + length));
        at += 4 + length;
      }
      return undefined;
    }
    pos = end;
  }
  return undefined;
}
