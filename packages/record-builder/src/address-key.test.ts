import { describe, expect, it } from 'vitest';
import { addressKey, addressKeyIn, isIpv6Key, keyAddress } from './address-key.js';

describe('address keys (the reverse index)', () => {
  it('keys IPv4 as a 32-bit integer, one per address, and gives the same text back', () => {
    const addresses = ['0.0.0.0', '10.244.1.7', '127.0.0.1', '128.0.0.0', '192.168.255.1', '255.255.255.255'];
    const keys = addresses.map(addressKey);
    for (const key of keys) expect(typeof key).toBe('number');
    expect(new Set(keys).size).toBe(addresses.length);
    expect(keys.map(keyAddress)).toEqual(addresses);
    // Addresses of 128.0.0.0 and above are negative: still integers V8 keeps inline.
    expect(keys.every((k) => Number.isInteger(k) && (k as number) >= -(2 ** 31) && (k as number) < 2 ** 31)).toBe(true);
  });

  it('keys IPv6 as its text, which round-trips and is told apart', () => {
    for (const ip of ['fd00::5', '2001:db8::1', '::ffff:10.0.0.1']) {
      const key = addressKey(ip);
      expect(key).toBe(ip);
      expect(isIpv6Key(key)).toBe(true);
      expect(keyAddress(key)).toBe(ip);
    }
    expect(isIpv6Key(addressKey('10.0.0.1'))).toBe(false);
  });

  it('reads an address in place, between offsets of a longer text', () => {
    const text = '10.0.0.1fd00::2192.168.0.3';
    expect(addressKeyIn(text, 0, 8)).toBe(addressKey('10.0.0.1'));
    expect(addressKeyIn(text, 8, 15)).toBe('fd00::2');
    expect(addressKeyIn(text, 15, text.length)).toBe(addressKey('192.168.0.3'));
  });
});
