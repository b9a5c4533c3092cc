import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import { ListStream, MalformedListError } from './list-stream.js';

/** Reads `octets` through a ListStream cut at `cuts`; returns the items (parsed) and the list's end. */
function read(octets: Buffer, cuts: number[] = []) {
  const items: unknown[] = [];
  const stream = new ListStream((json) => items.push(JSON.parse(json)));
  let from = 0;
  for (const cut of [...cuts, octets.length]) {
    stream.push(new Uint8Array(octets.subarray(from, cut)));
    from = cut;
  }
  return { items, end: stream.end() };
}

// A page as the API sends it: UTF-8, with non-ASCII text in a field DNS never reads, escapes, and
// brackets and the word "items" where only a parser that skips strings and counts depth is safe.
const page = {
  kind: 'ServiceList',
  apiVersion: 'v1',
  metadata: { resourceVersion: '4711', continue: 'eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ' },
  items: [
    {
      metadata: {
        name: 'web',
        namespace: 'prod',
        annotations: {
          'example.com/owner': 'Zoë Ünal — 日本語チーム 🚀',
          'example.com/quote': 'a "quoted" \\ value ending in a backslash \\',
          'example.com/brackets': '}]}"items":[{',
          items: '[]',
        },
      },
      spec: { clusterIP: '10.96.4.2', ports: [{ name: 'http', port: 80 }], items: [[1, 2], { items: [] }] },
    },
    { metadata: { name: 'db', namespace: 'prod' }, spec: { clusterIP: 'fd00::4:2' } },
    {},
  ],
};
const octets = Buffer.from(JSON.stringify(page), 'utf8');
/** The page as JSON.parse reads the same octets as latin1: what each item must equal. */
const expected = JSON.parse(octets.toString('latin1')) as typeof page;

describe('a list body cut into its items as it arrives', () => {
  it('gives each item and the list fields as JSON.parse of the whole body does, wherever the chunks are cut', () => {
    for (let cut = 0; cut <= octets.length; cut++) {
      const { items, end } = read(octets, [cut]);
      expect(items).toEqual(expected.items);
      expect(end).toEqual({ resourceVersion: '4711', continueToken: page.metadata.continue, items: 3 });
    }
    // One octet at a time: every state carried across a boundary at once.
    const each = read(
      octets,
      Array.from({ length: octets.length }, (_, i) => i),
    );
    expect(each.items).toEqual(expected.items);
  });

  it('keeps the non-ASCII text one character per octet, and the escapes as they were', () => {
    const { items } = read(octets, [7]);
    const first = items[0] as (typeof page.items)[0];
    expect(first.metadata?.annotations?.['example.com/quote']).toBe(
      page.items[0]?.metadata?.annotations?.['example.com/quote'],
    );
    expect(first.metadata?.annotations?.['example.com/owner']).toBe(
      Buffer.from('Zoë Ünal — 日本語チーム 🚀', 'utf8').toString('latin1'),
    );
  });

  it('reads a list laid out otherwise: indented, its metadata after the items, no items or null items', () => {
    const pretty = Buffer.from(JSON.stringify(page, null, 2));
    expect(read(pretty, [100, 101, 400]).items).toEqual(JSON.parse(pretty.toString('latin1')).items);
    const after = Buffer.from(JSON.stringify({ items: page.items, metadata: { resourceVersion: '9' } }));
    expect(read(after)).toEqual({
      items: expected.items,
      end: { resourceVersion: '9', continueToken: undefined, items: 3 },
    });
    for (const body of [
      '{"metadata":{"resourceVersion":"5"},"items":[]}',
      '{"metadata":{"resourceVersion":"5"},"items":null}',
    ])
      expect(read(Buffer.from(body))).toEqual({
        items: [],
        end: { resourceVersion: '5', continueToken: undefined, items: 0 },
      });
  });

  it('refuses a body cut short, empty, not an object, or with an item that is not an object', () => {
    const refused = (body: string | Buffer) => () => read(Buffer.isBuffer(body) ? body : Buffer.from(body));
    expect(refused(octets.subarray(0, octets.length - 1))).toThrow(MalformedListError);
    expect(refused(octets.subarray(0, octets.indexOf('db')))).toThrow(/ended before the list did/);
    expect(refused('')).toThrow(/empty/);
    expect(refused('[1, 2]')).toThrow(/not a JSON object/);
    expect(refused('{"items":["web"]}')).toThrow(/not an object/);
    expect(refused('{"items":[]}}')).toThrow(/closes more brackets/);
    expect(refused('{"metadata":{"resourceVersion":5,}')).toThrow(MalformedListError);
  });
});
