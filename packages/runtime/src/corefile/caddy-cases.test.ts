import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { filesOf } from './corefile-files.js';
import { CorefileError, type Directive, parseCorefile } from './parse.js';

// coredns/caddy's own parser tests (the Corefile syntax: keys, blocks, import, snippets, env),
// translated into data (testdata/caddy-cases.json, its notes say how) and run against our parser.

interface CaddyCase {
  readonly name: string;
  readonly corefile: string;
  readonly valid: boolean;
  readonly files?: Readonly<Record<string, string>>;
  readonly expectBlocks?: readonly { readonly keys: readonly string[]; readonly directives?: readonly string[] }[];
}

const cases = (
  JSON.parse(readFileSync(new URL('./testdata/caddy-cases.json', import.meta.url), 'utf8')) as {
    setup: CaddyCase[];
  }
).setup;

/** A directive as the table writes it: its tokens, a block as `{ line; line }`. */
function text(d: Directive): string {
  const head = [d.name, ...d.args].join(' ');
  if (!d.block) return head;
  return d.block.length ? `${head} { ${d.block.map(text).join('; ')} }` : `${head} { }`;
}

describe('the Corefile parser, against coredns/caddy’s own tables (testdata/caddy-cases.json)', () => {
  it.each(cases.map((c) => [c.name, c] as const))('%s', (_name, c) => {
    let blocks: ReturnType<typeof parseCorefile> | undefined;
    let error: unknown;
    try {
      blocks = parseCorefile(c.corefile, {
        source: '/corefile/Corefile',
        files: filesOf(c.files ?? {}),
      });
    } catch (e) {
      if (!(e instanceof CorefileError)) throw e;
      error = e;
    }
    expect(error === undefined, error instanceof Error ? error.message : 'accepted').toBe(c.valid);
    if (!c.valid || !c.expectBlocks || !blocks) return;
    expect(blocks.map((b) => b.keys)).toEqual(c.expectBlocks.map((b) => b.keys));
    c.expectBlocks.forEach((b, i) => {
      if (b.directives) expect(blocks?.[i]?.directives.map(text)).toEqual(b.directives);
    });
  });
});
