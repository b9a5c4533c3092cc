import { isIP } from 'node:net';
import { AddressError } from './errors.js';
import { type Fqdn, toFqdn } from './fqdn.js';
import { type Cidr, canonicalIpv6, ipv6Nibbles } from './ip-address.js';

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

/** At most this many zones stand for one block; a block that would need more is its enclosing zone. */
const MAX_ZONES_PER_BLOCK = 256;

/**
 * The reverse zones that together are exactly an address block, cut where reverse names can be
 * cut (octets under in-addr.arpa, nibbles under ip6.arpa): 10.96.0.0/12 is the 16 zones
 * `96.10.in-addr.arpa.` … `111.10.in-addr.arpa.`, fd00:10:96::/108 is one zone of 27 nibbles. A
 * block that would take more than 256 zones (a /7, say) is given as the one zone enclosing it.
 */
export function reverseZonesOf(block: Cidr): Fqdn[] {
  const step = block.family === 4 ? 8 : 4;
  const width = block.family === 4 ? 32 : 128;
  let cut = Math.max(step, Math.ceil(block.bits / step) * step);
  if (2 ** (cut - block.bits) > MAX_ZONES_PER_BLOCK) cut = Math.max(step, Math.floor(block.bits / step) * step);
  const count = cut > block.bits ? 2 ** (cut - block.bits) : 1;
  const base = (block.base >> BigInt(width - cut)) & ~(BigInt(count) - 1n);
  const zones: Fqdn[] = [];
  for (let i = 0n; i < BigInt(count); i++) {
    const prefix = base + i;
    const parts: string[] = [];
    for (let at = 0; at < cut / step; at++)
      parts.push(((prefix >> BigInt(at * step)) & BigInt(2 ** step - 1)).toString(block.family === 4 ? 10 : 16));
    zones.push(`${parts.join('.')}.${block.family === 4 ? 'in-addr' : 'ip6'}.arpa.` as Fqdn);
  }
  return zones;
}
