import { Buffer } from 'node:buffer';

/**
 * The part of Go's text/template that CoreDNS's `template` answers use: `{{ .Name }}`, fields of
 * fields (`.Question.Name`, `.Group.name`), `index`, `printf`, `parseInt`, `len`, `.Meta "x"`,
 * `if`/`else`/`end`, parentheses, pipes, and `{{-`/`-}}` trimming. A construct outside it is refused
 * when the template is compiled, so a Corefile that uses one fails at its line, not at a query.
 */

/** What a template reads: CoreDNS's templateData, fields by their Go names. */
export type TemplateValue = string | number | boolean | readonly TemplateValue[] | TemplateData | undefined;
export interface TemplateData {
  readonly [field: string]: TemplateValue | ((...args: TemplateValue[]) => TemplateValue);
}

/** A compiled template: its text for a query's data; throws TemplateRunError where Go's would fail. */
export interface CompiledTemplate {
  readonly source: string;
  run(data: TemplateData): string;
}

export class TemplateSyntaxError extends Error {}
export class TemplateRunError extends Error {}

type Term =
  | { kind: 'field'; path: string[] }
  | { kind: 'literal'; value: TemplateValue }
  | { kind: 'call'; name: string; args: Term[] }
  | { kind: 'pipe'; stages: Term[] };
type Node =
  | { kind: 'text'; text: string }
  | { kind: 'action'; term: Term }
  | { kind: 'if'; cond: Term; whenTrue: Node[]; otherwise: Node[] };

const FUNCTIONS = new Set(['index', 'printf', 'print', 'parseInt', 'len', 'eq', 'ne', 'not', 'and', 'or', 'lt', 'gt']);

/** The words of one action: strings, numbers, fields, names, parentheses and pipes. */
function actionWords(text: string): string[] {
  const words: string[] = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i] as string;
    if (/\s/.test(c)) i++;
    else if (c === '(' || c === ')' || c === '|') {
      words.push(c);
      i++;
    } else if (c === '"') {
      let j = i + 1;
      while (j < text.length && text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
      if (j >= text.length) throw new TemplateSyntaxError('unterminated quoted string');
      words.push(text.slice(i, j + 1));
      i = j + 1;
    } else if (c === '`') {
      const j = text.indexOf('`', i + 1);
      if (j < 0) throw new TemplateSyntaxError('unterminated raw string');
      words.push(`"${text.slice(i + 1, j).replace(/["\\]/g, '\\$&')}"`);
      i = j + 1;
    } else {
      let j = i;
      while (j < text.length && !/[\s()|"]/.test(text[j] as string)) j++;
      words.push(text.slice(i, j));
      i = j;
    }
  }
  return words;
}

function parseTerms(words: string[], at: { i: number }, until: string | undefined): Term {
  const stages: Term[] = [];
  let command: Term[] = [];
  const end = () => {
    if (command.length === 0) throw new TemplateSyntaxError('missing value for command');
    const [head, ...rest] = command as [Term, ...Term[]];
    if (head.kind === 'call' && head.args.length === 0) stages.push({ kind: 'call', name: head.name, args: rest });
    else if (rest.length === 0) stages.push(head);
    else if (head.kind === 'field' && head.path.at(-1) === 'Meta')
      stages.push({ kind: 'call', name: '.Meta', args: rest });
    else throw new TemplateSyntaxError(`can't give argument to non-function ${termText(head)}`);
    command = [];
  };
  while (at.i < words.length) {
    const w = words[at.i++] as string;
    if (w === until) break;
    if (w === '|') {
      end();
      continue;
    }
    if (w === '(') command.push(parseTerms(words, at, ')'));
    else if (w === ')') throw new TemplateSyntaxError('unexpected right paren');
    else command.push(termOf(w));
  }
  end();
  return stages.length === 1 ? (stages[0] as Term) : { kind: 'pipe', stages };
}

function termOf(word: string): Term {
  if (word.startsWith('"')) return { kind: 'literal', value: JSON.parse(word) as string };
  if (/^-?\d+$/.test(word)) return { kind: 'literal', value: Number(word) };
  if (word === 'true' || word === 'false') return { kind: 'literal', value: word === 'true' };
  if (word === '.') return { kind: 'field', path: [] };
  if (/^(\.[A-Za-z_][A-Za-z0-9_]*)+$/.test(word)) return { kind: 'field', path: word.slice(1).split('.') };
  if (FUNCTIONS.has(word)) return { kind: 'call', name: word, args: [] };
  if (word.startsWith('$')) throw new TemplateSyntaxError(`variables (${word}) are not supported`);
  throw new TemplateSyntaxError(`function ${JSON.stringify(word)} not defined`);
}

const termText = (t: Term): string => (t.kind === 'field' ? `.${t.path.join('.')}` : t.kind);

function parseNodes(source: string): Node[] {
  const root: Node[] = [];
  const stack: Array<{ node: Extract<Node, { kind: 'if' }>; inElse: boolean }> = [];
  const into = () => {
    const top = stack.at(-1);
    return top ? (top.inElse ? top.node.otherwise : top.node.whenTrue) : root;
  };
  let i = 0;
  let trimNext = false;
  while (i < source.length) {
    const open = source.indexOf('{{', i);
    let text = source.slice(i, open < 0 ? source.length : open);
    if (trimNext) text = text.replace(/^\s+/, '');
    trimNext = false;
    if (open < 0) {
      if (text) into().push({ kind: 'text', text });
      break;
    }
    let inner = source.slice(open + 2);
    const close = inner.indexOf('}}');
    if (close < 0) throw new TemplateSyntaxError('unclosed action');
    inner = inner.slice(0, close);
    if (inner.startsWith('- ')) text = text.replace(/\s+$/, '');
    if (text) into().push({ kind: 'text', text });
    if (inner.endsWith(' -')) trimNext = true;
    i = open + 2 + close + 2;
    const body = inner.replace(/^- /, '').replace(/ -$/, '').trim();
    if (body.startsWith('/*')) continue;
    const words = actionWords(body);
    const [first] = words;
    if (first === 'if') {
      const node: Extract<Node, { kind: 'if' }> = {
        kind: 'if',
        cond: parseTerms(words.slice(1), { i: 0 }, undefined),
        whenTrue: [],
        otherwise: [],
      };
      into().push(node);
      stack.push({ node, inElse: false });
    } else if (first === 'else') {
      const top = stack.at(-1);
      if (!top || top.inElse || words.length > 1) throw new TemplateSyntaxError('unexpected {{else}}');
      top.inElse = true;
    } else if (first === 'end') {
      if (!stack.pop()) throw new TemplateSyntaxError('unexpected {{end}}');
    } else if (first && ['range', 'with', 'define', 'template', 'block', 'break', 'continue'].includes(first)) {
      throw new TemplateSyntaxError(`{{${first}}} is not supported here`);
    } else if (words.length === 0) throw new TemplateSyntaxError('missing value for command');
    else into().push({ kind: 'action', term: parseTerms(words, { i: 0 }, undefined) });
  }
  if (stack.length) throw new TemplateSyntaxError('unexpected EOF: an {{if}} is not closed with {{end}}');
  return root;
}

function truthy(v: TemplateValue): boolean {
  if (Array.isArray(v)) return v.length > 0;
  if (v && typeof v === 'object') return true;
  return Boolean(v);
}

function printed(v: TemplateValue): string {
  if (v === undefined) return '<no value>';
  if (Array.isArray(v)) return `[${v.map(printed).join(' ')}]`;
  if (typeof v === 'object') return '{…}';
  return String(v);
}

/** Go's fmt verbs that templates use: %s %v %d %x %q %%. */
function sprintf(format: string, args: TemplateValue[]): string {
  let n = 0;
  return format.replace(/%([-+# 0]*\d*)([svdxXq%])/g, (_, flags: string, verb: string) => {
    if (verb === '%') return '%';
    const v = args[n++];
    const width = Number(/\d+/.exec(flags)?.[0] ?? 0);
    let s: string;
    if (verb === 'd') s = String(Math.trunc(Number(v)));
    else if (verb === 'x' || verb === 'X') {
      s = typeof v === 'number' ? v.toString(16) : Buffer.from(String(v)).toString('hex');
      if (verb === 'X') s = s.toUpperCase();
    } else if (verb === 'q') s = JSON.stringify(printed(v));
    else s = printed(v);
    return flags.includes('-') ? s.padEnd(width) : s.padStart(width, flags.includes('0') ? '0' : ' ');
  });
}

function call(name: string, args: TemplateValue[], data: TemplateData): TemplateValue {
  switch (name) {
    case 'index': {
      let v = args[0];
      for (const key of args.slice(1)) {
        if (Array.isArray(v)) {
          const at = Number(key);
          if (!Number.isInteger(at) || at < 0 || at >= v.length)
            throw new TemplateRunError(`error calling index: index out of range: ${printed(key)}`);
          v = v[at];
        } else if (v && typeof v === 'object') v = (v as TemplateData)[String(key)] as TemplateValue;
        else throw new TemplateRunError(`error calling index: can't index item of type ${typeof v}`);
      }
      return v ?? '';
    }
    case 'printf':
      return sprintf(String(args[0] ?? ''), args.slice(1));
    case 'print':
      return args.map(printed).join('');
    case 'len':
      if (Array.isArray(args[0])) return args[0].length;
      if (args[0] && typeof args[0] === 'object') return Object.keys(args[0]).length;
      return printed(args[0]).length;
    case 'parseInt': {
      // strconv.ParseUint(s, base, bitSize): an error fails the template, as in Go.
      const [text, base = 10, bits = 64] = args as [string, number, number];
      const s = String(text);
      const radix = Number(base) === 0 ? 10 : Number(base);
      if (
        !/^[0-9a-z]+$/i.test(s) ||
        [...s.toLowerCase()].some((c) => Number.parseInt(c, radix) >= radix || Number.isNaN(Number.parseInt(c, radix)))
      )
        throw new TemplateRunError(
          `error calling parseInt: strconv.ParseUint: parsing ${JSON.stringify(s)}: invalid syntax`,
        );
      const value = BigInt(Number.parseInt(s, radix));
      if (value >= 1n << BigInt(bits))
        throw new TemplateRunError(
          `error calling parseInt: strconv.ParseUint: parsing ${JSON.stringify(s)}: value out of range`,
        );
      return Number(value);
    }
    case 'eq':
      return args.slice(1).some((b) => b === args[0]);
    case 'ne':
      return args[0] !== args[1];
    case 'lt':
      return Number(args[0]) < Number(args[1]);
    case 'gt':
      return Number(args[0]) > Number(args[1]);
    case 'not':
      return !truthy(args[0]);
    case 'and':
      return args.find((a) => !truthy(a)) ?? args.at(-1);
    case 'or':
      return args.find((a) => truthy(a)) ?? args.at(-1);
    case '.Meta': {
      const meta = data.Meta;
      return typeof meta === 'function' ? meta(...args) : '';
    }
    default:
      throw new TemplateRunError(`function ${name} not defined`);
  }
}

function evaluate(t: Term, data: TemplateData, piped?: TemplateValue[]): TemplateValue {
  switch (t.kind) {
    case 'literal':
      return t.value;
    case 'field': {
      let v: TemplateValue | TemplateData = data;
      for (const name of t.path) {
        if (!v || typeof v !== 'object' || Array.isArray(v))
          throw new TemplateRunError(`can't evaluate field ${name} in type ${typeof v}`);
        const next: unknown = (v as TemplateData)[name];
        if (typeof next === 'function') return (next as () => TemplateValue)();
        v = next as TemplateValue;
      }
      return v as TemplateValue;
    }
    case 'call':
      return call(t.name, [...t.args.map((a) => evaluate(a, data)), ...(piped ?? [])], data);
    case 'pipe': {
      let value: TemplateValue[] | undefined;
      for (const stage of t.stages) value = [evaluate(stage, data, value)];
      return value?.[0];
    }
  }
}

function runNodes(nodes: readonly Node[], data: TemplateData): string {
  let out = '';
  for (const n of nodes) {
    if (n.kind === 'text') out += n.text;
    else if (n.kind === 'action') out += printed(evaluate(n.term, data));
    else out += runNodes(truthy(evaluate(n.cond, data)) ? n.whenTrue : n.otherwise, data);
  }
  return out;
}

/** The fields a template names that `known` does not have (nested: objects of names). */
function unknownFields(nodes: readonly Node[], known: KnownFields, out: string[] = []): string[] {
  const visit = (t: Term) => {
    if (t.kind === 'field') {
      let at: KnownFields | true = known;
      for (const name of t.path) {
        if (at === true) return;
        const next: KnownFields | true | undefined = at[name];
        if (next === undefined) {
          out.push(`.${t.path.join('.')}`);
          return;
        }
        at = next;
      }
    } else if (t.kind === 'call') t.args.forEach(visit);
    else if (t.kind === 'pipe') t.stages.forEach(visit);
  };
  for (const n of nodes) {
    if (n.kind === 'action') visit(n.term);
    else if (n.kind === 'if') {
      visit(n.cond);
      unknownFields(n.whenTrue, known, out);
      unknownFields(n.otherwise, known, out);
    }
  }
  return out;
}

/** The fields a template may name: `true` for a leaf or a map (any key). */
export interface KnownFields {
  readonly [field: string]: KnownFields | true;
}

/**
 * Compiles a template; throws TemplateSyntaxError saying what is not supported. A field `known`
 * lacks compiles, as Go's does (it fails when run): `unknown` lists them, for a warning.
 */
export function compileTemplate(source: string, known?: KnownFields): CompiledTemplate & { unknown: string[] } {
  const nodes = parseNodes(source);
  return { source, run: (data) => runNodes(nodes, data), unknown: known ? unknownFields(nodes, known) : [] };
}
