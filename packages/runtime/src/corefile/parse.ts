import { dirname, isAbsolute, join } from 'node:path';
import { ClusterDnsError } from '../errors.js';
import { type CorefileFiles, diskFiles } from './corefile-files.js';

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

/** Where a line came from: its file, and the chain of imports that brought it in (outermost first). */
export interface LineOrigin {
  readonly line: number;
  readonly file: string;
  /** `Corefile:5` for each `import` on the way, when the line was imported. */
  readonly via?: readonly string[];
}

/** One directive: a plugin line (`cache 30`), or a line inside a plugin's block (`success 9984 30`). */
export interface Directive extends LineOrigin {
  readonly name: string;
  readonly args: readonly string[];
  /** The `{ … }` after the arguments, if any. */
  readonly block: readonly Directive[] | undefined;
}

/** A server block: its keys (`cluster.local:53 in-addr.arpa:53`) and its plugins. */
export interface ServerBlock extends LineOrigin {
  readonly keys: readonly string[];
  readonly directives: readonly Directive[];
}

/** Something a Corefile says that runs, but deserves a line in the log (a glob that matches nothing). */
export interface CorefileWarning extends LineOrigin {
  readonly message: string;
}

export interface ParseOptions {
  /** The Corefile's path: errors name it, and a relative `import` is read from its folder. */
  readonly source?: string;
  /** Where imports are read from (the disk by default). */
  readonly files?: CorefileFiles;
  /** `{$NAME}` and `{%NAME%}` are replaced from these, as CoreDNS does from its environment. */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** Told of each warning (a glob import that matches nothing). */
  readonly onWarning?: (warning: CorefileWarning) => void;
}

interface Token {
  readonly text: string;
  readonly line: number;
  readonly file: string;
  /** `{`, `}` and the end of a line are structure; a quoted `"{"` is a word. */
  readonly kind: 'word' | 'open' | 'close' | 'newline';
  readonly via?: readonly string[];
}

/** Caddy's limits (coredns/caddy caddyfile/parse.go): a cycle of imports ends here, with an error. */
const MAX_SNIPPET_EXPANSIONS = 10_000;
const MAX_FILE_EXPANSIONS = 100_000;
const MAX_IMPORT_DEPTH = 100;

const envPattern = /\{\$([^}]+)\}|\{%([^}]+)%\}/g;

/** Caddyfile lexing as CoreDNS does it: words split on blanks, `#` comments, double quotes, braces. */
function tokenize(text: string, file: string, env: ParseOptions['env'], via?: readonly string[]): Token[] {
  const tokens: Token[] = [];
  let line = 1;
  let i = 0;
  const push = (t: Omit<Token, 'file'>) => tokens.push(via ? { ...t, file, via } : { ...t, file });
  const replaced = (word: string) =>
    env && word.includes('{') ? word.replace(envPattern, (_, a?: string, b?: string) => env[a ?? b ?? ''] ?? '') : word;
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
        if (i >= text.length) throw new CorefileError(start, 'a quoted word is not closed', file);
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
      push({ text: replaced(word), line: start, kind: 'word' });
    } else {
      let word = '';
      while (i < text.length && !/[\s#"]/.test(text[i] as string)) word += text[i++];
      // A brace is structure only as a word of its own or at a word's end (`zone {`, `cache{`).
      if (word === '{') push({ text: word, line, kind: 'open' });
      else if (word === '}') push({ text: word, line, kind: 'close' });
      else if (word.endsWith('{') && !word.startsWith('{')) {
        push({ text: replaced(word.slice(0, -1)), line, kind: 'word' });
        push({ text: '{', line, kind: 'open' });
      } else push({ text: replaced(word), line, kind: 'word' });
    }
  }
  return tokens;
}

/**
 * Parses a Corefile into server blocks, as coredns/caddy's caddyfile parser does: `import FILE`
 * or `import GLOB` (relative to the importing file's folder; a glob that matches nothing is a
 * warning), snippets `(name) { … }` with `import name`, `{$ENV}`, and one block without braces when
 * it is the only one. Only the syntax is checked here; what each plugin may say is its setup's
 * business (plugins/).
 */
export function parseCorefile(text: string, options: ParseOptions | string = {}): ServerBlock[] {
  const opts: ParseOptions = typeof options === 'string' ? { source: options } : options;
  return new Parser(text, opts).parse();
}

class Parser {
  private readonly tokens: Token[];
  private at = 0;
  private readonly snippets = new Map<string, Token[]>();
  private snippetExpansions = 0;
  private fileExpansions = 0;
  private readonly files: CorefileFiles;
  private readonly source: string;

  constructor(
    text: string,
    private readonly options: ParseOptions,
  ) {
    this.source = options.source ?? 'Corefile';
    this.files = options.files ?? diskFiles;
    this.tokens = tokenize(text, this.source, options.env);
  }

  private fail(t: { line: number; file: string } | undefined, message: string): never {
    throw new CorefileError(t?.line ?? 1, message, t?.file ?? this.source);
  }

  private peek(): Token | undefined {
    return this.tokens[this.at];
  }

  private skipNewlines(): void {
    for (;;) {
      this.expandImport();
      if (this.peek()?.kind !== 'newline') return;
      this.at++;
    }
  }

  /** Whether the token at `i` starts a line: the first, or after a newline, or from another file or line. */
  private startsLine(i: number): boolean {
    const prev = this.tokens[i - 1];
    const t = this.tokens[i] as Token;
    return prev === undefined || prev.kind === 'newline' || prev.file !== t.file || prev.line !== t.line;
  }

  /**
   * If the token here is `import` at the start of a line, puts what it names in its place: a
   * snippet's tokens, or the tokens of each file it matches. Repeats while the first token put in
   * is itself an import.
   */
  private expandImport(): void {
    for (;;) {
      const t = this.peek();
      if (t?.kind !== 'word' || t.text !== 'import' || !this.startsLine(this.at)) return;
      const args: Token[] = [];
      for (let i = this.at + 1; ; i++) {
        const a = this.tokens[i];
        if (a === undefined || a.kind === 'newline' || a.line !== t.line || a.file !== t.file) break;
        if (a.kind !== 'word') this.fail(a, `import: unexpected "${a.text}"`);
        args.push(a);
      }
      if (args.length !== 1) this.fail(t, 'import takes only one argument: a file, a glob or a snippet');
      const name = (args[0] as Token).text;
      if (name === '') this.fail(t, 'import: the path is empty');
      const depth = (t.via?.length ?? 0) + 1;
      if (depth > MAX_IMPORT_DEPTH) this.fail(t, `import: nested more than ${MAX_IMPORT_DEPTH} deep (a cycle?)`);
      const via = [...(t.via ?? []), `${t.file}:${t.line}`];
      const replacement = this.snippets.has(name) ? this.snippetTokens(t, name, via) : this.fileTokens(t, name, via);
      this.tokens.splice(this.at, 2, ...replacement);
    }
  }

  private snippetTokens(t: Token, name: string, via: string[]): Token[] {
    if (++this.snippetExpansions > MAX_SNIPPET_EXPANSIONS)
      this.fail(t, `import: more than ${MAX_SNIPPET_EXPANSIONS} snippet imports (a cycle?)`);
    return (this.snippets.get(name) ?? []).map((s) => ({ ...s, via }));
  }

  private fileTokens(t: Token, pattern: string, via: string[]): Token[] {
    if (++this.fileExpansions > MAX_FILE_EXPANSIONS)
      this.fail(t, `import: more than ${MAX_FILE_EXPANSIONS} file imports (a cycle?)`);
    const path = isAbsolute(pattern) ? pattern : join(dirname(t.file), pattern);
    const stars = pattern.split('*').length - 1;
    const marks = pattern.split('?').length - 1;
    if (stars > 1 || marks > 1 || (pattern.includes('[') && pattern.includes(']')))
      this.fail(t, `import: a glob may hold one * and one ? at most (caddy's rule), got ${JSON.stringify(pattern)}`);
    let paths: string[];
    if (stars + marks > 0) {
      paths = this.files.glob(path);
      if (paths.length === 0) {
        this.options.onWarning?.({ line: t.line, file: t.file, message: `no files match import glob ${pattern}` });
        return [];
      }
    } else {
      if (this.files.isDirectory(path))
        this.fail(t, `import: ${pattern} is a directory; import a glob such as ${pattern}/*`);
      paths = [path];
    }
    const out: Token[] = [];
    for (const file of paths) {
      if (this.files.isDirectory(file)) continue;
      let text: string;
      try {
        text = this.files.read(file);
      } catch (error) {
        this.fail(t, `import: cannot read ${file}: ${(error as Error).message}`);
      }
      const tokens = tokenize(text, file, this.options.env, via);
      out.push(...tokens, { text: '\n', line: t.line, file: t.file, kind: 'newline', via });
    }
    return out;
  }

  private readBody(open: Token, untilEof = false): Directive[] {
    const out: Directive[] = [];
    for (;;) {
      this.skipNewlines();
      const t = this.peek();
      if (t === undefined) {
        if (untilEof) return out;
        this.fail(open, 'the block opened here is not closed');
      }
      if (t.kind === 'close') {
        if (untilEof) this.fail(t, 'unexpected "}"');
        this.at++;
        return out;
      }
      if (t.kind === 'open') this.fail(t, 'a block must follow a directive name');
      this.at++;
      const args: string[] = [];
      let block: Directive[] | undefined;
      for (;;) {
        const n = this.peek();
        if (n === undefined || n.kind === 'newline' || n.kind === 'close') break;
        if (n.kind === 'open') {
          this.at++;
          block = this.readBody(n);
          break;
        }
        args.push(n.text);
        this.at++;
      }
      out.push({ name: t.text, args, block, ...originOf(t) });
    }
  }

  /** A snippet's body as raw tokens (its imports are expanded where it is imported). */
  private readSnippet(key: Token): void {
    const name = key.text.slice(1, -1);
    if (this.snippets.has(name)) this.fail(key, `redeclaration of previously declared snippet ${name}`);
    this.at++;
    while (this.peek()?.kind === 'newline') this.at++;
    const open = this.peek();
    if (open?.kind !== 'open') this.fail(key, `snippet ${key.text} needs a { … } body`);
    this.at++;
    const body: Token[] = [];
    let depth = 1;
    for (;;) {
      const t = this.peek();
      if (t === undefined) this.fail(open, 'the block opened here is not closed');
      this.at++;
      if (t.kind === 'open') depth++;
      if (t.kind === 'close' && --depth === 0) break;
      body.push(t);
    }
    const selfImport = body.findIndex(
      (t, i) => t.text === 'import' && body[i + 1]?.text === name && (i === 0 || body[i - 1]?.kind === 'newline'),
    );
    if (selfImport >= 0) this.fail(body[selfImport], `snippet ${name} imports itself`);
    this.snippets.set(name, body);
  }

  parse(): ServerBlock[] {
    const blocks: ServerBlock[] = [];
    for (;;) {
      this.skipNewlines();
      const first = this.peek();
      if (first === undefined) break;
      if (first.kind !== 'word') this.fail(first, `expected a server block's zone, got "${first.text}"`);
      if (/^\(.+\)$/.test(first.text)) {
        this.readSnippet(first);
        continue;
      }
      const keys: string[] = [];
      let continues = false;
      let braced = false;
      for (;;) {
        const t = this.peek();
        if (t === undefined) {
          if (continues) this.fail(first, 'a server block key list ends in a comma');
          break;
        }
        if (t.kind === 'open') {
          if (continues) this.fail(t, 'a server block key list ends in a comma');
          this.at++;
          braced = true;
          break;
        }
        if (t.kind === 'close') this.fail(t, 'unexpected "}"');
        // Keys may go on the next line after a trailing comma (`a:53,` then `b:53 {`).
        if (t.kind === 'newline') {
          if (!continues) break;
          this.at++;
          continue;
        }
        keys.push(...t.text.split(',').filter((k) => k !== ''));
        continues = t.text.endsWith(',');
        this.at++;
      }
      let directives: Directive[];
      if (braced) directives = this.readBody(first);
      else {
        // Caddy's one server block without braces: its directives run to the end of the file.
        this.skipNewlines();
        if (this.peek()?.kind === 'open') {
          this.at++;
          directives = this.readBody(first);
        } else {
          if (blocks.length > 0)
            this.fail(first, `server block "${keys.join(' ')}" needs a { … } body (only a lone block may go without)`);
          directives = this.readBody(first, true);
        }
      }
      // An empty quoted key with nothing in it is no block (caddy).
      if (keys.length === 0 && directives.length === 0) continue;
      blocks.push({ keys, directives, ...originOf(first) });
    }
    return blocks;
  }
}

function originOf(t: Token): LineOrigin {
  return t.via ? { line: t.line, file: t.file, via: t.via } : { line: t.line, file: t.file };
}

/** Where a line came from, for a person: `Corefile:12`, or `custom/a.override:3 (imported at Corefile:5)`. */
export function originText(o: LineOrigin): string {
  const at = `${o.file}:${o.line}`;
  return o.via?.length ? `${at} (imported at ${o.via.join(' → ')})` : at;
}
