import { describe, expect, it } from 'vitest';
import { toFqdn } from './fqdn.js';
import { canonicalIpv6 } from './ip-address.js';
import { addressFromReverseName, reverseNameOf } from './reverse-name.js';

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
