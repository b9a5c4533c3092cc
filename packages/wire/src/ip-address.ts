import { isIPv4, isIPv6 } from 'node:net';
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
