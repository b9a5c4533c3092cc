import { describe, expect, it } from 'vitest';
import { latin1Of, putU16, putU32, u16, u32 } from './octets.js';

describe('octets by index', () => {
  it('reads and writes as Buffer does, the top bit included', () => {
    const ours = Buffer.alloc(8);
    const theirs = Buffer.alloc(8);
    for (const value of [0, 1, 0x7fff_ffff, 0x8000_0000, 0xffff_ffff, 604_800]) {
      putU32(ours, value, 2);
      theirs.writeUInt32BE(value, 2);
      expect(ours).toEqual(theirs);
      expect(u32(ours, 2)).toBe(value);
    }
    for (const value of [0, 0x00ff, 0x8000, 0xffff]) {
      putU16(ours, value, 5);
      theirs.writeUInt16BE(value, 5);
      expect(ours).toEqual(theirs);
      expect(u16(ours, 5)).toBe(theirs.readUInt16BE(5));
    }
  });

  it('reads octets as a latin1 string as toString does, every octet value and any range', () => {
    const all = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    expect(latin1Of(all, 0, 256)).toBe(all.toString('latin1'));
    expect(latin1Of(all, 12, 40)).toBe(all.toString('latin1', 12, 40));
    expect(latin1Of(all, 5, 5)).toBe('');
    expect(latin1Of(all.subarray(100), 1, 3)).toBe(String.fromCharCode(101, 102));
  });
});
