import { isIP } from 'node:net';
import { AddressError } from './errors.js';
import { type Fqdn, toFqdn } from './fqdn.js';

/** Expands an IPv6 address to its 32 hex nibbles. */
function ipv6Nibbles(address: string): string {
  const [head = '', tail] = address.split('::');
  const parse = (part: string) => (part === '' ? [] : part.split(':'));
  let groups = parse(head);
  if (tail !== undefined) {
    const tailGroups = parse(tail);
    groups = [...groups, ...Array(8 - groups.length - tailGroups.length).fill('0'), ...tailGroups];
  }
  return groups
    .map((g) => g.padStart(4, '0'))
    .join('')
    .toLowerCase();
}

/** The PTR owner of an address: `4.3.2.1.in-addr.arpa.` or the nibble form under `ip6.arpa.`. */
export function reverseNameOf(address: string): Fqdn {
  if (isIP(address) === 4) {
    const [a, b, c, d] = address.split('.');
    // Digits and dots only: already canonical, no lowercasing needed.
    return `${d}.${c}.${b}.${a}.in-addr.arpa.` as Fqdn;
  }
  if (isIP(address) === 6) return toFqdn(`${ipv6Nibbles(address).split('').reverse().join('.')}.ip6.arpa`);
  throw new AddressError(address);
}

/** The address a full reverse name stands for, or undefined for a partial or malformed one. */
export function addressFromReverseName(name: Fqdn): string | undefined {
  const v4 = /^((?:\d{1,3}\.){4})in-addr\.arpa\.$/.exec(name);
  if (v4) {
    const octets = (v4[1] as string).slice(0, -1).split('.').reverse();
    if (octets.some((o) => Number(o) > 255 || (o.length > 1 && o.startsWith('0')))) return undefined;
    return octets.join('.');
  }
  const v6 = /^((?:[0-9a-f]\.){32})ip6\.arpa\.$/.exec(name);
  if (v6) {
    const hex = (v6[1] as string).replace(/\./g, '').split('').reverse().join('');
    const groups = hex.match(/.{4}/g) ?? [];
    return canonicalIpv6(groups.join(':'));
  }
  return undefined;
}

/** RFC 5952 text form, so addresses from names compare equal to addresses from the API. */
export function canonicalIpv6(address: string): string {
  const groups =
    ipv6Nibbles(address)
      .match(/.{4}/g)
      ?.map((g) => g.replace(/^0+(?=.)/, '')) ?? [];
  let bestStart = -1;
  let bestLength = 1;
  for (let i = 0; i < groups.length; ) {
    if (groups[i] !== '0') {
      i++;
      continue;
    }
    let j = i;
    while (j < groups.length && groups[j] === '0') j++;
    if (j - i > bestLength) {
      bestStart = i;
      bestLength = j - i;
    }
    i = j;
  }
  if (bestStart === -1) return groups.join(':');
  return `${groups.slice(0, bestStart).join(':')}::${groups.slice(bestStart + bestLength).join(':')}`;
}
