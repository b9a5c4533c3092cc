import { EDNS_MAX_UDP_BYTES, QTYPE } from './constants.js';

/**
 * Our OPT record (RFC 6891 §6.1.2): root owner, our UDP size, the extended rcode bits, version 0,
 * the DO bit echoed. 11 octets, no options.
 */
export function encodeOptRecord(
  options: { extendedRcode?: number; dnssecOk?: boolean; udpSize?: number } = {},
): Buffer {
  const out = Buffer.alloc(11);
  out[0] = 0;
  out.writeUInt16BE(QTYPE.OPT, 1);
  out.writeUInt16BE(options.udpSize ?? EDNS_MAX_UDP_BYTES, 3);
  out[5] = options.extendedRcode ?? 0;
  out[6] = 0;
  out.writeUInt16BE(options.dnssecOk ? 0x8000 : 0, 7);
  out.writeUInt16BE(0, 9);
  return out;
}
