import { Buffer } from 'node:buffer';
import { EDNS_DEFAULT_UDP_BYTES, EDNS_DO_BIT, OPT_RECORD_BYTES, QTYPE } from './constants.js';

/**
 * Our OPT record (RFC 6891 §6.1.2): root owner, our UDP payload size, the extended rcode bits,
 * version 0, the DO bit echoed. No options: a client's unknown options are never echoed.
 */
export function encodeOptRecord(
  options: { extendedRcode?: number; dnssecOk?: boolean; udpSize?: number } = {},
): Buffer {
  const out = Buffer.alloc(OPT_RECORD_BYTES);
  out[0] = 0;
  out.writeUInt16BE(QTYPE.OPT, 1);
  out.writeUInt16BE(options.udpSize ?? EDNS_DEFAULT_UDP_BYTES, 3);
  out[5] = options.extendedRcode ?? 0;
  out[6] = 0;
  out.writeUInt16BE(options.dnssecOk ? EDNS_DO_BIT : 0, 7);
  out.writeUInt16BE(0, 9);
  return out;
}
