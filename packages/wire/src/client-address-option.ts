import { Buffer } from 'node:buffer';
import { isIPv4, isIPv6 } from 'node:net';
import { addressOctets, canonicalIpv6, numberToIpv4, withoutIpv4Mapping } from './ip-address.js';
import { ednsOption } from './opt-record.js';

/**
 * Our EDNS0 option naming the client a node cache asks for (the pod behind it), so the cluster's
 * DNS behind the node cache can tell its pods apart (CoreDNS's `rewrite edns0 local` does the like
 * for any bytes). The code is from the range kept for local and experimental use (RFC 6891 §9).
 * Its data is laid out as EDNS Client Subnet's (RFC 7871 §6): FAMILY (1 IPv4, 2 IPv6), SOURCE
 * PREFIX-LENGTH (always the whole address), SCOPE PREFIX-LENGTH 0, then the address's octets.
 * Only our own builders of upstream queries add it, and only toward the cluster's DNS.
 */
export const CLIENT_ADDRESS_OPTION = 65054;

/** The option's data for a client address (IPv4, IPv6, or IPv4 mapped into IPv6 as sockets report it). */
export function encodeClientAddress(address: string): Buffer {
  return encodeClientSubnet(address, 32, 128);
}

/**
 * An EDNS Client Subnet option's data (RFC 7871 §6): the family, the source prefix length and
 * scope 0, then the address cut to that prefix, in as many octets as the prefix covers.
 */
export function encodeClientSubnet(address: string, v4Bits: number, v6Bits: number): Buffer {
  const plain = withoutIpv4Mapping(address);
  const v4 = isIPv4(plain);
  const bits = v4 ? v4Bits : v6Bits;
  const octets = addressOctets(plain);
  const kept = Math.ceil(bits / 8);
  const out = Buffer.alloc(4 + kept);
  out.writeUInt16BE(v4 ? 1 : 2, 0);
  out[2] = bits;
  for (let i = 0; i < kept; i++) {
    const left = bits - i * 8;
    out[4 + i] = (octets[i] ?? 0) & (left >= 8 ? 0xff : (0xff << (8 - left)) & 0xff);
  }
  return out;
}

/** The client address a message's option names, or undefined when it has none or a malformed one. */
export function clientAddressOf(message: Buffer): string | undefined {
  let data: Buffer | undefined;
  try {
    data = ednsOption(message, CLIENT_ADDRESS_OPTION);
  } catch {
    return undefined;
  }
  if (data === undefined || data.length < 4) return undefined;
  const family = data.readUInt16BE(0);
  if (family === 1 && data.length === 8 && data[2] === 32) return numberToIpv4(data.readUInt32BE(4));
  if (family === 2 && data.length === 20 && data[2] === 128) {
    const groups = Array.from({ length: 8 }, (_, i) => data.readUInt16BE(4 + 2 * i).toString(16));
    const text = canonicalIpv6(groups.join(':'));
    return isIPv6(text) ? text : undefined;
  }
  return undefined;
}
