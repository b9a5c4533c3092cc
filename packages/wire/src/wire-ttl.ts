import type { Buffer } from 'node:buffer';
import { QTYPE } from './constants.js';

// Apart from message.ts, whose dns2 import would come with it: the express lanes read TTLs
// (response-scan.ts) and must not load dns2 (~1 MiB of each worker's heap).

/**
 * A record's TTL as RFC 2181 §8 says to take it: a value with the top bit set is 0. The OPT's
 * TTL field is not a TTL (extended rcode, version, flags) and is read as it is.
 */
export function wireTtl(raw: Buffer, offset: number, type: number): number {
  const ttl = raw.readUInt32BE(offset);
  return type !== QTYPE.OPT && ttl > 0x7fffffff ? 0 : ttl;
}
