import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import { WatchLines } from './watch-lines.js';

function read(octets: Buffer, cuts: number[]): string[] {
  const lines: string[] = [];
  const reader = new WatchLines((line) => lines.push(line));
  let from = 0;
  for (const cut of [...cuts, octets.length]) {
    reader.push(new Uint8Array(octets.subarray(from, cut)));
    from = cut;
  }
  reader.end();
  return lines;
}

describe('a watch body cut into its lines', () => {
  const events = [
    { type: 'ADDED', object: { metadata: { name: 'web', annotations: { note: 'Zoë\nsaid "hi"' } } } },
    { type: 'BOOKMARK', object: { metadata: { resourceVersion: '42' } } },
    { type: 'DELETED', object: { metadata: { name: 'db' } } },
  ];
  const body = Buffer.from(`${events.map((e) => JSON.stringify(e)).join('\n')}\n`, 'utf8');

  it('gives each event line whole, wherever the chunks are cut', () => {
    for (let cut = 0; cut <= body.length; cut++) {
      const lines = read(body, [cut]);
      expect(lines.map((l) => JSON.parse(l).type)).toEqual(['ADDED', 'BOOKMARK', 'DELETED']);
      expect(JSON.parse(lines[2] as string)).toEqual(events[2]);
    }
    const each = read(
      body,
      Array.from({ length: body.length }, (_, i) => i),
    );
    expect(each).toHaveLength(3);
  });

  it('reads CRLF line ends, skips blank lines, and keeps a last line with no newline', () => {
    const text = Buffer.from('{"type":"ADDED"}\r\n\r\n\n{"type":"DELETED"}');
    expect(read(text, [17])).toEqual(['{"type":"ADDED"}', '{"type":"DELETED"}']);
  });
});
