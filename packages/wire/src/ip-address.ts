import { isIP, isIPv4, isIPv6 } from 'node:net';
import { AddressError } from './errors.js';

/** An IPv4 address as a 32-bit number (for compact stores and fast comparison). */
export function ipv4ToNumber(address: string): number {
  let value = 0;
  let octet = 0;
  let digits = 0;
  let parts = 0;
  for (let i = 0; i <= address.length; i++) {
    const c = i < address.length ? address.charCodeAt(i) : 0x2e;
    if (c === 0x2e) {
      if (digits === 0 || octet > 255) throw new AddressError(address);
      value = value * 256 + octet;
      octet = 0;
      digits = 0;
      parts++;
    } else if (c >= 0x30 && c <= 0x39 && digits < 3) {
      octet = octet * 10 + (c - 0x30);
      digits++;
    } else throw new AddressError(address);
  }
  if (parts !== 4) throw new AddressError(address);
  return value >>> 0;
}

export function numberToIpv4(value: number): string {
  return `${value >>> 24}.${(value >>> 16) & 255}.${(value >>> 8) & 255}.${value & 255}`;
}

/** The eight 16-bit groups of an IPv6 address, an embedded IPv4 tail (`::ffff:10.0.0.1`) included. */
export function ipv6Groups(address: string): number[] {
  if (!isIPv6(address)) throw new AddressError(address);
  let text = address.replace(/%.*$/, '');
  const lastColon = text.lastIndexOf(':');
  const tail = text.slice(lastColon + 1);
  if (tail.includes('.')) {
    if (!isIPv4(tail)) throw new AddressError(address);
    const v4 = ipv4ToNumber(tail);
    text = `${text.slice(0, lastColon + 1)}${(v4 >>> 16).toString(16)}:${(v4 & 0xffff).toString(16)}`;
  }
  const [head = '', rest] = text.split('::');
  const parse = (part: string) => (part === '' ? [] : part.split(':').map((g) => Number.parseInt(g, 16)));
  const front = parse(head);
  if (rest === undefined) return front;
  const back = parse(rest);
  return [...front, ...Array(8 - front.length - back.length).fill(0), ...back];
}

/** An address's octets in network order: 4 for IPv4, 16 for IPv6. */
export function addressOctets(address: string): number[] {
  if (isIPv4(address)) {
    const v = ipv4ToNumber(address);
    return [v >>> 24, (v >>> 16) & 255, (v >>> 8) & 255, v & 255];
  }
  return ipv6Groups(address).flatMap((g) => [g >> 8, g & 255]);
}

/** RFC 5952 text form, so addresses from names compare equal to addresses from the API. */
export function canonicalIpv6(address: string): string {
  const groups = ipv6Groups(address);
  let bestStart = -1;
  let bestLength = 1;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLength) {
      bestStart = i;
      bestLength = j - i;
    }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (bestStart === -1) return hex.join(':');
  return `${hex.slice(0, bestStart).join(':')}::${hex.slice(bestStart + bestLength).join(':')}`;
}

/** An address's 32 hex nibbles, most significant first. */
export function ipv6Nibbles(address: string): string {
  return ipv6Groups(address)
    .map((g) => g.toString(16).padStart(4, '0'))
    .join('');
}

/** An address block (`10.0.0.0/8`, `fd00::/64`; a bare address is the block of itself). */
export interface Cidr {
  readonly family: 4 | 6;
  readonly base: bigint;
  readonly bits: number;
}

const toBig = (address: string): { family: 4 | 6; value: bigint } =>
  isIPv6(address)
    ? { family: 6, value: ipv6Groups(address).reduce((n, g) => (n << 16n) | BigInt(g), 0n) }
    : { family: 4, value: BigInt(ipv4ToNumber(address)) };

/** Parses `ip/bits` or `ip`; undefined when it is neither. */
export function parseCidr(text: string): Cidr | undefined {
  const [address = '', bitsText] = text.split('/');
  if (isIP(address) === 0) return undefined;
  const { family, value } = toBig(address);
  const width = family === 4 ? 32 : 128;
  const bits = bitsText === undefined ? width : Number(bitsText);
  if (!/^\d+$/.test(bitsText ?? '0') || bits > width) return undefined;
  const mask = ((1n << BigInt(bits)) - 1n) << BigInt(width - bits);
  return { family, base: value & mask, bits };
}

/** Dotted IPv4 whose octets may carry leading zeros, read as decimal; undefined when it is not one. */
function sloppyIpv4(text: string): string | undefined {
  const parts = text.split('.');
  if (parts.length !== 4 || !parts.every((p) => /^\d{1,10}$/.test(p) && Number(p) <= 255)) return undefined;
  return parts.map(Number).join('.');
}

/**
 * An address from a Kubernetes object, read as Kubernetes reads it (netutils.ParseIPSloppy, Go's
 * parser before 1.17), in the one text form our records compare by: IPv4 octets with leading zeros
 * are decimal (`010.000.000.001` is 10.0.0.1, never octal 8.0.0.1), an IPv4-mapped IPv6 address is
 * its IPv4 address (Go's To4, so it gets an A record), any other IPv6 is RFC 5952 text. Objects
 * stored before KEP-4858's stricter validation can still hold the first two. Undefined when the
 * text is no address (a zone index `%eth0` included, which Go refuses too).
 */
export function readApiAddress(text: string): string | undefined {
  if (!text.includes(':')) return isIPv4(text) ? text : sloppyIpv4(text);
  if (text.includes('%')) return undefined;
  const lastColon = text.lastIndexOf(':');
  const tail = text.slice(lastColon + 1);
  const plainTail = tail.includes('.') ? sloppyIpv4(tail) : tail;
  if (plainTail === undefined) return undefined;
  const address = `${text.slice(0, lastColon + 1)}${plainTail}`;
  if (!isIPv6(address)) return undefined;
  const g = ipv6Groups(address);
  if (g[0] === 0 && g[1] === 0 && g[2] === 0 && g[3] === 0 && g[4] === 0 && g[5] === 0xffff)
    return numberToIpv4((((g[6] as number) << 16) | (g[7] as number)) >>> 0);
  return canonicalIpv6(address);
}

/** An IPv4-mapped IPv6 address (`::ffff:10.0.0.1`, as a dual-stack socket reports) as plain IPv4; any other as it is. */
export function withoutIpv4Mapping(address: string): string {
  return /^::ffff:/i.test(address) && isIPv4(address.slice(7)) ? address.slice(7) : address;
}

/** Whether an address is on this host's loopback (127.0.0.0/8, ::1), IPv4-mapped or not. */
export function isLoopback(address: string): boolean {
  const plain = withoutIpv4Mapping(address);
  return plain.startsWith('127.') || plain === '::1';
}

/** Whether `address` (IPv4-mapped IPv6 read as IPv4) is inside the block. */
export function cidrContains(cidr: Cidr, address: string): boolean {
  const plain = withoutIpv4Mapping(address);
  if (isIP(plain) === 0) return false;
  const { family, value } = toBig(plain);
  if (family !== cidr.family) return false;
  const width = family === 4 ? 32 : 128;
  return value >> BigInt(width - cidr.bits) === cidr.base >> BigInt(width - cidr.bits);
}
