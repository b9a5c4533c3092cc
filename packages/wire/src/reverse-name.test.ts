import { describe, expect, it } from 'vitest';
import { toFqdn } from './fqdn.js';
import { type Cidr, canonicalIpv6, parseCidr } from './ip-address.js';
import { addressFromReverseName, reverseNameOf, reverseZonesOf } from './reverse-name.js';

describe('reverse names', () => {
  it.each([
    ['10.96.0.1', '1.0.96.10.in-addr.arpa.'],
    ['fd00:10:96::30', '0.3.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.9.0.0.0.1.0.0.0.0.d.f.ip6.arpa.'],
  ])('maps %s to %s and back', (address, name) => {
    expect(reverseNameOf(address)).toBe(name);
    expect(addressFromReverseName(toFqdn(name))).toBe(address);
  });

  it.each(['1.0.96.in-addr.arpa.', '256.0.96.10.in-addr.arpa.', '01.0.96.10.in-addr.arpa.', 'x.ip6.arpa.'])(
    'gives no address for the partial or malformed %s',
    (name) => expect(addressFromReverseName(toFqdn(name))).toBeUndefined(),
  );

  it('writes IPv6 in RFC 5952 form', () => {
    expect(canonicalIpv6('2001:0db8:0000:0000:0000:0000:0000:0001')).toBe('2001:db8::1');
    expect(canonicalIpv6('2001:db8:0:1:0:0:0:1')).toBe('2001:db8:0:1::1');
  });
});

describe('reverseZonesOf', () => {
  const zones = (text: string) => reverseZonesOf(parseCidr(text) as Cidr);

  it('cuts an IPv4 block at octets: a /12 is 16 zones of /16, a /16 and a /24 one each', () => {
    const twelve = zones('10.96.0.0/12');
    expect(twelve).toHaveLength(16);
    expect(twelve[0]).toBe('96.10.in-addr.arpa.');
    expect(twelve.at(-1)).toBe('111.10.in-addr.arpa.');
    expect(zones('10.96.0.0/16')).toEqual(['96.10.in-addr.arpa.']);
    expect(zones('192.168.7.0/24')).toEqual(['7.168.192.in-addr.arpa.']);
    expect(zones('192.168.7.128/25')).toEqual(
      Array.from({ length: 128 }, (_, i) => `${128 + i}.7.168.192.in-addr.arpa.`),
    );
  });

  it('cuts an IPv6 block at nibbles: a /108 is one zone of 27 nibbles, a /110 four of 28', () => {
    const one = zones('fd00:10:96::/108');
    expect(one).toHaveLength(1);
    expect(one[0]).toBe(`${'0.'.repeat(15)}6.9.0.0.0.1.0.0.0.0.d.f.ip6.arpa.`);
    const four = zones('fd00:10:96::/110');
    expect(four).toHaveLength(4);
    expect(four.map((z) => z.split('.')[0])).toEqual(['0', '1', '2', '3']);
  });

  it('gives the enclosing zone for a block too wide to list, and the block of an unaligned base', () => {
    expect(zones('10.0.0.0/7')).toEqual(['10.in-addr.arpa.', '11.in-addr.arpa.']);
    expect(zones('12.0.0.0/6')).toEqual([
      '12.in-addr.arpa.',
      '13.in-addr.arpa.',
      '14.in-addr.arpa.',
      '15.in-addr.arpa.',
    ]);
    // /3: 2^5 = 32 zones of /8.
    expect(zones('32.0.0.0/3')).toHaveLength(32);
    expect(zones('10.96.5.7/12')[0]).toBe('96.10.in-addr.arpa.');
  });
});
