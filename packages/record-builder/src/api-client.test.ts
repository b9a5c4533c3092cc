import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import { asciiBody } from './api-client.js';

/** `octets` as a body stream cut at `cuts` (offsets), as the network may cut it. */
async function* chunks(octets: Buffer, cuts: number[]): AsyncIterable<Uint8Array> {
  let from = 0;
  for (const cut of [...cuts, octets.length]) {
    yield new Uint8Array(octets.subarray(from, cut));
    from = cut;
  }
}

describe('a list body read as latin1', () => {
  // A page as the API sends it: UTF-8, with non-ASCII text in a field DNS never reads.
  const page = {
    kind: 'ServiceList',
    metadata: { resourceVersion: '4711', continue: 'eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ' },
    items: [
      {
        metadata: {
          name: 'café-is-not-a-dns-name-but-web-is',
          namespace: 'prod',
          annotations: {
            'example.com/owner': 'Zoë Ünal — 日本語チーム 🚀',
            'example.com/quote': 'a "quoted" \\ value',
          },
        },
        spec: { clusterIP: '10.96.4.2', ports: [{ name: 'http', port: 80 }] },
      },
      { metadata: { name: 'web', namespace: 'prod' }, spec: { clusterIP: 'fd00::4:2' } },
    ],
  };
  const octets = Buffer.from(JSON.stringify(page), 'utf8');

  it('parses to the same JSON structure and the same ASCII fields, wherever the chunks are cut', async () => {
    // Every cut inside the multi-octet characters, and around them.
    const start = octets.indexOf('Zo');
    for (let cut = start; cut < start + 60; cut++) {
      const list = JSON.parse(await asciiBody(chunks(octets, [7, cut]))) as typeof page;
      expect(list.metadata).toEqual(page.metadata);
      expect(list.items.map((i) => [i.metadata.name.endsWith('web-is'), i.metadata.namespace, i.spec])).toEqual(
        page.items.map((i) => [i.metadata.name.endsWith('web-is'), i.metadata.namespace, i.spec]),
      );
      expect(list.items[1]).toEqual(page.items[1]);
      // Escapes inside strings survive; the non-ASCII text is one character per octet, unread.
      expect(list.items[0]?.metadata.annotations?.['example.com/quote']).toBe('a "quoted" \\ value');
      expect(list.items[0]?.metadata.annotations?.['example.com/owner']).toBe(
        Buffer.from('Zoë Ünal — 日本語チーム 🚀', 'utf8').toString('latin1'),
      );
    }
  });

  it('reads an empty body, and no body at all, as empty text', async () => {
    expect(await asciiBody(chunks(Buffer.alloc(0), []))).toBe('');
    expect(await asciiBody(null)).toBe('');
  });
});
