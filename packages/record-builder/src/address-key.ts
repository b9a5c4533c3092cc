/**
 * An address as the reverse (PTR) index keys it: IPv4 as its 32 bits in a signed integer, which V8
 * keeps inline in a Map (a small integer, no object to allocate or mark), IPv6 as its RFC 5952
 * text. A cluster whose headless endpoints all have hostnames has a PTR for every one of them: a
 * string key each would be a hundred thousand more objects for every full GC of the answering
 * thread to visit.
 */
export type AddressKey = number | string;

/** The key of the canonical address `text.slice(from, to)`, read in place (no string for IPv4). */
export function addressKeyIn(text: string, from: number, to: number): AddressKey {
  let value = 0;
  let octet = 0;
  let dots = 0;
  for (let i = from; i < to; i++) {
    const c = text.charCodeAt(i);
    if (c === 46 /* . */) {
      value = (value << 8) | octet;
      octet = 0;
      dots++;
    } else if (c >= 48 && c <= 57) octet = octet * 10 + (c - 48);
    else return text.slice(from, to);
  }
  return dots === 3 ? (value << 8) | octet | 0 : text.slice(from, to);
}

export const addressKey = (ip: string): AddressKey => addressKeyIn(ip, 0, ip.length);

/** The canonical address of a key. */
export function keyAddress(key: AddressKey): string {
  if (typeof key === 'string') return key;
  return `${key >>> 24}.${(key >>> 16) & 255}.${(key >>> 8) & 255}.${key & 255}`;
}

export const isIpv6Key = (key: AddressKey): key is string => typeof key === 'string';
