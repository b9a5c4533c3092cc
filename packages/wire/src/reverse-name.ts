import { isIP } from 'node:net';
import { AddressError } from './errors.js';
import { type Fqdn, toFqdn } from './fqdn.js';
import { canonicalIpv6, ipv6Nibbles } from './ip-address.js';

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
