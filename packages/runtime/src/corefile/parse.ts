import { ClusterDnsError } from '../errors.js';

/** A Corefile that does not parse, or asks for something we do not do: names the line (and the plugin). */
export class CorefileError extends ClusterDnsError {
  constructor(
    readonly line: number,
    message: string,
    readonly source = 'Corefile',
  ) {
    super('COREFILE_INVALID', `${source} line ${line}: ${message}`, {
      hint: 'the plugins and options each mode takes are listed in docs/corefile.md',
    });
  }
}

/** One directive: a plugin line (`cache 30`), or a line inside a plugin's block (`success 9984 30`). */
export interface Directive {
  readonly name: string;
  readonly args: readonly string[];
  /** The `{ … }` after the arguments, if any. */
  readonly block: readonly Directive[] | undefined;
  readonly line: number;
}

/** A server block: its keys (`cluster.local:53 in-addr.arpa:53`) and its plugins. */
export interface ServerBlock {
  readonly keys: readonly string[];
  readonly directives: readonly Directive[];
  readonly line: number;
}

interface Token {
  readonly text: string;
  readonly line: number;
  /** `{`, `}` and the end of a line are structure; a quoted `"{"` is a word. */
  readonly kind: 'word' | 'open' | 'close' | 'newline';
}

/** Caddyfile lexing as CoreDNS does it: words split on blanks, `#` comments, double quotes, braces. */
function tokenize(text: string, source: string): Token[] {
  const tokens: Token[] = [];
  let line = 1;
  let i = 0;
  const push = (t: Token) => tokens.push(t);
  while (i < text.length) {
    const c = text[i] as string;
    if (c === '\n') {
      push({ text: '\n', line, kind: 'newline' });
      line++;
      i++;
    } else if (c === ' ' || c === '\t' || c === '\r') {
      i++;
    } else if (c === '#') {
      while (i < text.length && text[i] !== '\n') i++;
    } else if (c === '"') {
      const start = line;
      let word = '';
      i++;
      for (;;) {
        if (i >= text.length) throw new CorefileError(start, 'a quoted word is not closed', source);
        const q = text[i] as string;
        if (q === '"') break;
        if (q === '\\' && text[i + 1] === '"') {
          word += '"';
          i += 2;
          continue;
        }
        if (q === '\n') line++;
        word += q;
        i++;
      }
      i++;
      push({ text: word, line: start, kind: 'word' });
    } else {
      let word = '';
      while (i < text.length && !/[\s#"]/.test(text[i] as string)) word += text[i++];
      // A brace is structure only as a word of its own or at a word's end (`zone {`, `cache{`).
      if (word === '{') push({ text: word, line, kind: 'open' });
      else if (word === '}') push({ text: word, line, kind: 'close' });
      else if (word.endsWith('{')) {
        push({ text: word.slice(0, -1), line, kind: 'word' });
        push({ text: '{', line, kind: 'open' });
      } else push({ text: word, line, kind: 'word' });
    }
  }
  return tokens;
}

/**
 * Parses a Corefile into server blocks. Only the syntax is checked here (braces, keys, at least
 * one block); what each plugin may say is its setup's business (plugins/). `import` and snippets
 * are not supported: neither kubeadm's Corefile nor nodelocaldns.yaml uses them.
 */
export function parseCorefile(text: string, source = 'Corefile'): ServerBlock[] {
  const tokens = tokenize(text, source);
  let at = 0;
  const peek = () => tokens[at];
  const skipNewlines = () => {
    while (peek()?.kind === 'newline') at++;
  };

  const readBody = (openLine: number): Directive[] => {
    const out: Directive[] = [];
    for (;;) {
      skipNewlines();
      const t = peek();
      if (t === undefined) throw new CorefileError(openLine, 'the block opened here is not closed', source);
      if (t.kind === 'close') {
        at++;
        return out;
      }
      if (t.kind === 'open') throw new CorefileError(t.line, 'a block must follow a directive name', source);
      at++;
      const args: string[] = [];
      let block: Directive[] | undefined;
      for (;;) {
        const n = peek();
        if (n === undefined || n.kind === 'newline') break;
        if (n.kind === 'close') break;
        if (n.kind === 'open') {
          at++;
          block = readBody(n.line);
          break;
        }
        args.push(n.text);
        at++;
      }
      if (t.text === 'import') throw new CorefileError(t.line, '"import" is not supported', source);
      out.push({ name: t.text, args, block, line: t.line });
    }
  };

  const blocks: ServerBlock[] = [];
  for (;;) {
    skipNewlines();
    const first = peek();
    if (first === undefined) break;
    if (first.kind !== 'word')
      throw new CorefileError(first.line, `expected a server block's zone, got "${first.text}"`, source);
    const keys: string[] = [];
    let continues = false;
    for (;;) {
      const t = peek();
      if (t === undefined) throw new CorefileError(first.line, 'a server block needs a { … } body', source);
      if (t.kind === 'open') {
        at++;
        break;
      }
      if (t.kind === 'close') throw new CorefileError(t.line, 'unexpected "}"', source);
      // Keys may go on the next line after a trailing comma (`a:53,` then `b:53 {`).
      if (t.kind === 'newline') {
        if (!continues)
          throw new CorefileError(t.line, `server block "${keys.join(' ')}" needs its "{" on the same line`, source);
        at++;
        continue;
      }
      keys.push(...t.text.split(',').filter((k) => k !== ''));
      continues = t.text.endsWith(',');
      at++;
    }
    blocks.push({
      keys,
      directives: readBody(first.line),
      line: first.line,
    });
  }
  if (blocks.length === 0) throw new CorefileError(1, 'no server block', source);
  return blocks;
}
