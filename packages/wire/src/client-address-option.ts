import { Buffer } from 'node:buffer';
import { isIPv4, isIPv6 } from 'node:net';
import { canonicalIpv6, ipv4ToNumber, ipv6Groups, numberToIpv4, withoutIpv4Mapping } from './ip-address.js';
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
  const plain = withoutIpv4Mapping(address);
  if (isIPv4(plain)) {
    const out = Buffer.alloc(8);
    out.writeUInt16BE(1, 0);
    out[2] = 32;
    out.writeUInt32BE(ipv4ToNumber(plain), 4);
    return out;
  }
  const out = Buffer.alloc(20);
  out.writeUInt16BE(2, 0);
  out[2] = 128;
  const groups = ipv6Groups(plain);
  for (let i = 0; i < groups.length; i++) out.writeUInt16BE(groups[i] as number, 4 + 2 * i);
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
