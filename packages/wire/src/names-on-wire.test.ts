import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { NameError, QueryFormatError } from './errors.js';
import { closestZone, isInZone, labelsOf, parentOf, toFqdn } from './fqdn.js';
import { readName, writeName } from './names-on-wire.js';

/** A name on the wire from raw labels: length octet, label octets, …, zero. */
const wire = (labels: number[][]) => Buffer.from([...labels.flatMap((l) => [l.length, ...l]), 0]);

/** Up to 4 labels of 1–63 arbitrary octets, at most 255 octets in all. */
const anyLabels = fc
  .array(fc.array(fc.integer({ min: 0, max: 255 }), { minLength: 1, maxLength: 63 }), { maxLength: 4 })
  .filter((labels) => labels.reduce((n, l) => n + l.length + 1, 1) <= 255);

describe('the name codec', () => {
  it('writes back exactly the octets it read, for any label octets (property)', () => {
    fc.assert(
      fc.property(anyLabels, (labels) => {
        const octets = wire(labels);
        const { name, end } = readName(octets, 0);
        expect(end).toBe(octets.length);
        expect(writeName(name)).toEqual(octets);
      }),
      { numRuns: 2000 },
    );
  });

  it('reads any text form it writes back to the same text (property)', () => {
    fc.assert(
      fc.property(anyLabels, (labels) => {
        const text = readName(wire(labels), 0).name;
        expect(readName(writeName(text), 0).name).toBe(text);
        // The text form is plain ASCII, safe in logs and metric labels.
        expect(/^[\x21-\x7e]*$/.test(text)).toBe(true);
      }),
    );
  });

  it.each([
    ['a dot inside a label', [[0x61, 0x2e, 0x62]], 'a\\.b.'],
    ['a backslash', [[0x61, 0x5c]], 'a\\\\.'],
    ['a space and a NUL', [[0x20, 0x00]], '\\032\\000.'],
    ['octets at and above 0x7f', [[0x7f, 0x80, 0xff]], '\\127\\128\\255.'],
    ['the root', [], '.'],
  ])('escapes %s in the text form', (_what, labels, text) => {
    expect(readName(wire(labels), 0).name).toBe(text);
    expect(writeName(text)).toEqual(wire(labels));
  });

  it('keeps a dotted label one label: `a\\.b` stays two labels, not three', () => {
    const name = toFqdn('a\\.b.Example.org');
    expect(labelsOf(name)).toEqual(['a\\.b', 'example', 'org']);
    expect(parentOf(name)).toBe('example.org.');
    expect(isInZone(toFqdn('x\\.cluster.local'), toFqdn('cluster.local'))).toBe(false);
    expect(isInZone(toFqdn('x.cluster.local'), toFqdn('cluster.local'))).toBe(true);
    // \065 is "A": one name, whichever way it is written.
    expect(toFqdn('\\065.example')).toBe('a.example.');
  });

  it('closestZone finds the longest zone holding a name, not a suffix that is no zone of it', () => {
    const zones = new Map([
      [toFqdn('cluster.local'), 'cluster'],
      [toFqdn('svc.cluster.local'), 'svc'],
      [toFqdn('ster.local'), 'suffix only'],
    ]);
    expect(closestZone(zones, toFqdn('web.shop.svc.cluster.local'))).toBe('svc');
    expect(closestZone(zones, toFqdn('pod.cluster.local'))).toBe('cluster');
    expect(closestZone(zones, toFqdn('example.org'))).toBeUndefined();
  });

  it.each([
    ['an empty label', 'a..b'],
    ['a label over 63 octets', `${'x'.repeat(64)}.example`],
    ['a name over 255 octets', `${'abcdefgh.'.repeat(29)}org`],
    ['a decimal escape over 255', 'a\\256.b'],
    ['a trailing backslash', 'a\\'],
  ])('refuses to write %s, naming the problem', (_what, text) => {
    expect(() => writeName(text)).toThrow(NameError);
  });

  it.each([
    ['a pointer to itself', Buffer.from([0xc0, 0x00])],
    ['a forward pointer', Buffer.from([0xc0, 0x02, 0x00])],
    ['a pointer past the end', Buffer.from([0x01, 0x61, 0xc0, 0x40])],
    ['a reserved 0x40 label type', Buffer.from([0x41, 0x61, 0x00])],
    ['a reserved 0x80 label type', Buffer.from([0x81, 0x61, 0x00])],
    ['no terminating zero', Buffer.from([0x01, 0x61])],
    ['a 256-octet name', wire(Array.from({ length: 4 }, () => Array(63).fill(0x61)))],
  ])('refuses to read %s', (_what, octets) => {
    expect(() => readName(octets, 0)).toThrow(QueryFormatError);
  });

  it('reads a 255-octet name, the most there may be', () => {
    const labels = [...Array.from({ length: 3 }, () => Array(63).fill(0x61)), Array(61).fill(0x62)];
    // 3 × (63 + 1) + (61 + 1) + 1 = 255 octets on the wire; 3 × 63 + 61 characters and 4 dots as text.
    expect(readName(wire(labels), 0).name.length).toBe(254);
  });

  it('follows a chain of backward pointers, and refuses one of 200 hops', () => {
    // "a." at 0, then pointers each to the one before.
    const hops = (n: number) => {
      const out = [0x01, 0x61, 0x00];
      for (let i = 0; i < n; i++) out.push(0xc0, i === 0 ? 0 : 3 + (i - 1) * 2);
      return Buffer.from(out);
    };
    const short = hops(10);
    expect(readName(short, short.length - 2).name).toBe('a.');
    const long = hops(200);
    expect(() => readName(long, long.length - 2)).toThrow(/loop/);
  });
});
