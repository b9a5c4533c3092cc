import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import { decodeZonePosition, encodeZonePosition, objectHash, resourceVersionNumber } from './zone-position.js';

describe('zone position: where a copy of our zones stands on the cluster’s clock', () => {
  it('carries each resource’s versions and fingerprint through the wire, and the maker', () => {
    const position = {
      origin: Buffer.from('0102030405060708', 'hex'),
      resources: new Map([
        [
          1,
          { version: 9_007_199_254_740_000, upto: 9_007_199_254_740_991, fingerprint: { count: 3, sum: 0xfffffffe } },
        ],
        [2, { version: 42, upto: 42 }],
      ]),
    };
    const back = decodeZonePosition(encodeZonePosition(position));
    expect(back?.origin.toString('hex')).toBe('0102030405060708');
    expect([...(back?.resources ?? [])]).toEqual([...position.resources]);
  });

  it('reads what it cannot use as no position (then the IXFR goes by serial)', () => {
    const good = encodeZonePosition({ origin: Buffer.alloc(8), resources: new Map([[1, { version: 5, upto: 6 }]]) });
    expect(decodeZonePosition(good.subarray(0, good.length - 1))).toBeUndefined();
    expect(decodeZonePosition(Buffer.concat([Buffer.from([2]), good.subarray(1)]))).toBeUndefined();
    // A highest version below the lowest is no position.
    const bad = Buffer.from(good);
    bad.writeUInt32BE(4, 2 + 8 + 1 + 8 + 4);
    expect(decodeZonePosition(bad)).toBeUndefined();
  });

  it('takes resourceVersions as integers only (KEP-5504), and hashes an object by name and version', () => {
    expect(resourceVersionNumber('123456789')).toBe(123456789);
    for (const opaque of ['', 'abc', '12a', '-1', '1.5', '99999999999999999'])
      expect(resourceVersionNumber(opaque)).toBeUndefined();
    expect(objectHash('ns/a', '10')).toBe(objectHash('ns/a', '10'));
    expect(objectHash('ns/a', '10')).not.toBe(objectHash('ns/a', '11'));
    expect(objectHash('ns/a', '10')).not.toBe(objectHash('ns/b', '10'));
  });
});
