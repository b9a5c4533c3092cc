import { Buffer } from 'node:buffer';
import { classFromText, QTYPE, typeFromName } from '@cluster-dns/wire';
import type { DirectiveArgs } from '../args.js';
import { RCODE_BY_NAME } from '../rcode-names.js';
import { goRegex } from './errors.js';

export type NameMatch = 'exact' | 'prefix' | 'suffix' | 'substring' | 'regex';

/** A regex rewrite of names in a response: CoreDNS's `answer name FROM TO` and `answer value FROM TO`. */
export interface RegexRewrite {
  readonly from: RegExp;
  /** With `{1}`… for the groups. */
  readonly to: string;
}

/** Which question names a rule applies to (the name as the rules before left it). */
export interface NameMatcher {
  readonly match: NameMatch;
  /** Lowercased with a trailing dot, as CoreDNS normalises it (a regex's pattern as written). */
  readonly from: string;
  /** The regex of a `regex` match. */
  readonly pattern: RegExp | undefined;
}

interface RuleBase {
  /** `stop` (the default) ends the rule list when the rule matches; `continue` goes on. */
  readonly stop: boolean;
  readonly line: number;
}

export interface NameRule extends RuleBase, NameMatcher {
  readonly field: 'name';
  readonly to: string;
  /** `answer auto`: names in the answer mapped back (always for `exact`). */
  readonly answerAuto: boolean;
  readonly answerName: RegexRewrite | undefined;
  readonly answerValue: RegexRewrite | undefined;
}

/** `type FROM TO` and `class FROM TO`: the question's type or class. */
export interface QuestionFieldRule extends RuleBase {
  readonly field: 'type' | 'class';
  readonly from: number;
  readonly to: number;
}

/** `ttl [MATCH] NAME SECONDS|MIN-MAX`: every record's TTL in the answer brought into the range. */
export interface TtlRule extends RuleBase {
  readonly field: 'ttl';
  readonly name: NameMatcher;
  readonly min: number;
  readonly max: number;
}

/** `rcode [MATCH] NAME FROM TO`: the answer's RCODE FROM made TO. */
export interface RcodeRule extends RuleBase {
  readonly field: 'rcode';
  readonly name: NameMatcher;
  readonly from: number;
  readonly to: number;
}

export type Edns0Action = 'set' | 'append' | 'replace' | 'unset';

/** The data of an `edns0 local` option: bytes, or what a variable names, made per query. */
export type Edns0Data =
  | { readonly bytes: Buffer }
  | { readonly variable: 'qname' | 'qtype' | 'client_ip' | 'client_port' | 'protocol' };

/** `edns0 local|nsid|subnet ACTION …`: an EDNS0 option of the question as it goes on upstream. */
export type Edns0Rule = RuleBase & {
  readonly field: 'edns0';
  readonly action: Edns0Action;
  /** `revert`: CoreDNS takes the option out of the reply again; ours never carry a question's options. */
  readonly revert: boolean;
} & (
    | { readonly option: 'local'; readonly code: number; readonly data: Edns0Data | undefined }
    | { readonly option: 'nsid' }
    | { readonly option: 'subnet'; readonly v4Bits: number; readonly v6Bits: number }
  );

/** One `rewrite` rule (coredns/coredns plugin/rewrite). */
export type RewriteRule = NameRule | QuestionFieldRule | TtlRule | RcodeRule | Edns0Rule;

const MATCHES: readonly NameMatch[] = ['exact', 'prefix', 'suffix', 'substring', 'regex'];

/** CoreDNS's `dns.StringToRcode`, with BADVERS (16) by its name too, and numbers up to 23. */
const RCODES: Readonly<Record<string, number>> = { ...RCODE_BY_NAME, BADVERS: 16 };

const VARIABLES = ['qname', 'qtype', 'client_ip', 'client_port', 'protocol'] as const;

function regex(a: DirectiveArgs, raw: string): RegExp {
  // Matched case-insensitively, as names are.
  return goRegex(a, raw, 'i');
}

/**
 * FROM and TO as CoreDNS normalises them (plugin.Name.Normalize): lowercased, with a trailing dot,
 * for every match type (so `prefix www web` turns `www.example.org.` into `web.example.org.`).
 */
function normalised(raw: string): string {
  const lower = raw.toLowerCase();
  return lower.endsWith('.') ? lower : `${lower}.`;
}

function matcher(a: DirectiveArgs, match: NameMatch, from: string): NameMatcher {
  return match === 'regex'
    ? { match, from, pattern: regex(a, from) }
    : { match, from: normalised(from), pattern: undefined };
}

/** `[MATCH] NAME REST…` of a ttl or rcode rule, as CoreDNS reads it: the match type only when all are there. */
function matchedName(a: DirectiveArgs, args: readonly string[], rest: number, field: string) {
  const full = args.length === rest + 2;
  const match = full ? args[0]?.toLowerCase() : 'exact';
  if (!MATCHES.includes(match as NameMatch))
    a.fail(`${field} rule supports only exact, prefix, suffix, substring, and regex name matching`);
  const name = matcher(a, match as NameMatch, args[full ? 1 : 0] as string);
  return { name, values: args.slice(full ? 2 : 1) };
}

function nameRule(a: DirectiveArgs, args: readonly string[], stop: boolean): NameRule {
  if (args.length < 2) a.fail('too few arguments for a name rule');
  const rest = [...args];
  let match: NameMatch = 'exact';
  if (rest.length >= 3) {
    const m = rest.shift()?.toLowerCase();
    if (!MATCHES.includes(m as NameMatch)) a.fail(`name rule supports only ${MATCHES.join(', ')}; got ${m}`);
    match = m as NameMatch;
  }
  const [from, to, ...options] = rest as [string, string, ...string[]];
  let answerAuto = match === 'exact';
  let explicitAuto = false;
  let answerName: RegexRewrite | undefined;
  let answerValue: RegexRewrite | undefined;
  // answer auto | answer name FROM TO | answer value FROM TO; `answer` may be left out after the first.
  for (let first = true; options.length; first = false) {
    if (options[0] === 'answer') options.shift();
    else if (first) a.fail(`expected "answer", got ${JSON.stringify(options[0])}`);
    const [kind, x, y] = options;
    if (kind === 'auto') {
      answerAuto = true;
      explicitAuto = true;
      options.splice(0, 1);
    } else if ((kind === 'name' || kind === 'value') && x !== undefined && y !== undefined) {
      const rule = { from: groupsFor(a, regex(a, x), y), to: normalised(y) };
      if (kind === 'name') answerName = rule;
      else answerValue = rule;
      options.splice(0, 3);
    } else a.fail('expected answer auto, answer name FROM TO or answer value FROM TO');
  }
  if (answerName && explicitAuto) a.fail('auto name answer rule cannot be combined with explicit name answer rules');
  const m = matcher(a, match, from);
  if (m.pattern) groupsFor(a, m.pattern, to);
  return {
    field: 'name',
    ...m,
    to: normalised(to),
    answerAuto,
    answerName,
    answerValue,
    stop,
    line: a.directive.line,
  };
}

/** The pattern, once TO is found to use no more groups (`{N}`) than it has, as CoreDNS checks. */
function groupsFor(a: DirectiveArgs, pattern: RegExp, to: string): RegExp {
  const groups = (new RegExp(`${pattern.source}|`).exec('')?.length ?? 1) - 1;
  let used = 0;
  for (let i = 0; i <= 100; i++) if (to.includes(`{${i}}`)) used++;
  if (used > groups)
    a.fail(
      `the rewrite regex pattern (${to}) uses more subexpressions than its corresponding matching regex pattern (${pattern.source})`,
    );
  return pattern;
}

function typeOf(a: DirectiveArgs, raw: string | undefined): number {
  const type = raw === undefined ? undefined : typeFromName(raw.toUpperCase());
  if (type === undefined || type === QTYPE.OPT) a.fail(`invalid type ${JSON.stringify(raw ?? '')}`);
  return type;
}

function classOf(a: DirectiveArgs, raw: string | undefined): number {
  const upper = raw?.toUpperCase();
  // dns.StringToClass: the names only (IN, CS, CH, HS, NONE, ANY), not CLASSnnn.
  const known = upper !== undefined && /^(IN|CS|CH|HS|NONE|ANY)$/.test(upper) ? classFromText(upper) : undefined;
  if (known === undefined) a.fail(`invalid class ${JSON.stringify(upper ?? '')}`);
  return known;
}

function ttlRange(a: DirectiveArgs, raw: string | undefined): { min: number; max: number } {
  const bad = () => a.fail(`invalid TTL ${JSON.stringify(raw ?? '')} for a ttl rule`);
  const part = (p: string) => (/^\d+$/.test(p) && Number(p) <= 0xffff_ffff ? Number(p) : bad());
  const bounds = raw?.split('-') ?? [];
  if (bounds.length === 1) {
    const ttl = part(bounds[0] as string);
    return { min: ttl, max: ttl };
  }
  if (bounds.length !== 2) return bad();
  const [lo, hi] = bounds as [string, string];
  // "-" alone would mean every TTL: CoreDNS refuses it.
  if (lo === '' && hi === '') return bad();
  const min = lo === '' ? 0 : part(lo);
  const max = hi === '' ? 2_147_483_647 : part(hi);
  if (min > max) return bad();
  return { min, max };
}

function rcodeOf(a: DirectiveArgs, raw: string | undefined, what: string): number {
  const n =
    raw !== undefined && /^\d+$/.test(raw) && Number(raw) <= 23 ? Number(raw) : RCODES[raw?.toUpperCase() ?? ''];
  if (n === undefined) a.fail(`invalid ${what} RCODE ${JSON.stringify(raw ?? '')} for a rcode rule`);
  // Above 15 an RCODE needs the OPT record's extended bits, which our replies take from the query.
  if (n > 15) a.fail(`RCODE ${raw} needs EDNS extended RCODE bits, which this forwarder does not rewrite`);
  return n;
}

/** strconv.ParseUint(s, 0, bits): 0x, 0o, 0b prefixes or a leading 0 for octal. */
function goUint(a: DirectiveArgs, raw: string | undefined, what: string, max: number): number {
  const text = (raw ?? '').replaceAll('_', '');
  const m = /^0[xX]([0-9a-fA-F]+)$|^0[oO]?([0-7]+)$|^0[bB]([01]+)$|^([1-9]\d*|0)$/.exec(text);
  const n = !m
    ? Number.NaN
    : m[1] !== undefined
      ? Number.parseInt(m[1], 16)
      : m[2] !== undefined
        ? Number.parseInt(m[2], 8)
        : m[3] !== undefined
          ? Number.parseInt(m[3], 2)
          : Number(m[4]);
  if (!Number.isFinite(n) || n > max) a.fail(`invalid ${what} ${JSON.stringify(raw ?? '')}`);
  return n;
}

function localData(a: DirectiveArgs, raw: string): Edns0Data {
  if (raw.startsWith('{') && raw.endsWith('}')) {
    const name = raw.slice(1, -1);
    if ((VARIABLES as readonly string[]).includes(name)) return { variable: name as (typeof VARIABLES)[number] };
    if (name === 'server_ip' || name === 'server_port')
      a.fail(`${raw} is not supported: the forwarder does not know the address a query arrived on`);
    return a.fail(
      /^[a-z0-9_-]+\/[a-z0-9_./-]+$/i.test(name)
        ? `${raw}: metadata labels are not supported (no metadata plugin runs here)`
        : `unsupported variable name ${JSON.stringify(raw)}`,
    );
  }
  if (!raw.startsWith('0x')) return { bytes: Buffer.from(raw, 'utf8') };
  const hex = raw.slice(2);
  if (!/^([0-9a-fA-F]{2})*$/.test(hex)) a.fail(`${JSON.stringify(raw)} is not hex data`);
  return { bytes: Buffer.from(hex, 'hex') };
}

function edns0Rule(a: DirectiveArgs, given: readonly string[], stop: boolean): Edns0Rule {
  if (given.length < 2) a.fail('too few arguments for an EDNS0 rule');
  const option = given[0]?.toLowerCase();
  const action = given[1]?.toLowerCase() as Edns0Action;
  if (!['set', 'append', 'replace', 'unset'].includes(action)) a.fail(`invalid action: ${JSON.stringify(action)}`);
  const base = { field: 'edns0' as const, action, stop, line: a.directive.line };
  if (action === 'unset') {
    if (option === 'local') {
      if (given.length !== 3) a.fail('local unset action requires exactly two arguments');
      return { ...base, revert: false, option, code: goUint(a, given[2], 'EDNS0 code', 0xffff), data: undefined };
    }
    if (option === 'nsid' || option === 'subnet') {
      if (given.length !== 2) a.fail(`${option} unset action requires exactly one argument`);
      return option === 'nsid'
        ? { ...base, revert: false, option }
        : { ...base, revert: false, option, v4Bits: 0, v6Bits: 0 };
    }
    return a.fail(`invalid rule type ${JSON.stringify(option)}`);
  }
  const revert = given[given.length - 1] === 'revert';
  const args = revert ? given.slice(0, -1) : given;
  switch (option) {
    case 'local':
      if (args.length !== 4) a.fail('EDNS0 local rules require three or four args');
      return {
        ...base,
        revert,
        option,
        code: goUint(a, args[2], 'EDNS0 code', 0xffff),
        data: localData(a, args[3] as string),
      };
    case 'nsid':
      if (args.length !== 2) a.fail('EDNS0 NSID rules can accept no more than one arg');
      return { ...base, revert, option };
    case 'subnet': {
      if (args.length !== 4) a.fail('EDNS0 subnet rules require three or four args');
      const v4Bits = goUint(a, args[2], 'IPv4 bit mask length', 0xffff);
      const v6Bits = goUint(a, args[3], 'IPv6 bit mask length', 0xffff);
      if (v4Bits > 32) a.fail(`invalid IPv4 bit mask length ${v4Bits}`);
      if (v6Bits > 128) a.fail(`invalid IPv6 bit mask length ${v6Bits}`);
      return { ...base, revert, option, v4Bits, v6Bits };
    }
    default:
      return a.fail(`invalid rule type ${JSON.stringify(option ?? '')}`);
  }
}

/**
 * One `rewrite` line. As CoreDNS reads it (rewriteParse): a line of fewer than two arguments takes
 * the tokens of its `{ … }` block as the rest of the line, so `rewrite stop { name regex … ;
 * answer name … }` is one rule.
 */
export function setupRewrite(a: DirectiveArgs): RewriteRule {
  let args = [...a.directive.args];
  if (a.directive.block) {
    if (args.length >= 2) a.fail('a { … } block follows only rewrite, rewrite stop or rewrite continue');
    args = [...args, ...a.directive.block.flatMap((d) => [d.name, ...d.args])];
  }
  if (args.length === 0) a.fail('no rule type specified for rewrite');
  let stop = true;
  const mode = args[0]?.toLowerCase();
  if (mode === 'continue' || mode === 'stop') {
    if (args.length < 2) a.fail(`${mode} rule must begin with a rule type`);
    stop = mode === 'stop';
    args = args.slice(1);
  }
  const [field, ...rest] = args as [string, ...string[]];
  switch (field.toLowerCase()) {
    case 'answer':
      return a.fail('response rewrites must begin with a name rule');
    case 'name':
      return nameRule(a, rest, stop);
    case 'type':
    case 'class': {
      const f = field.toLowerCase() as 'type' | 'class';
      if (rest.length !== 2) a.fail(`${f} rules must have exactly two arguments`);
      const read = f === 'type' ? typeOf : classOf;
      return { field: f, from: read(a, rest[0]), to: read(a, rest[1]), stop, line: a.directive.line };
    }
    case 'ttl': {
      if (rest.length < 2) a.fail(`too few (${rest.length}) arguments for a ttl rule`);
      if (rest.length > 3) a.fail(`invalid TTL ${JSON.stringify('')} for a ttl rule`);
      const { name, values } = matchedName(a, rest, 1, 'ttl');
      return { field: 'ttl', name, ...ttlRange(a, values[0]), stop, line: a.directive.line };
    }
    case 'rcode': {
      if (rest.length < 3) a.fail(`too few (${rest.length}) arguments for a rcode rule`);
      if (rest.length > 4) a.fail('too many arguments for a rcode rule');
      const { name, values } = matchedName(a, rest, 2, 'rcode');
      const from = rcodeOf(a, values[0], 'matching');
      return { field: 'rcode', name, from, to: rcodeOf(a, values[1], 'replacement'), stop, line: a.directive.line };
    }
    case 'edns0':
      return edns0Rule(a, rest, stop);
    case 'cname':
      return a.fail(
        'cname rules are not supported (CoreDNS looks the rewritten target up itself); a name rule with "answer value" rewrites targets',
      );
    default:
      return a.fail(`invalid rule type ${JSON.stringify(field)}`);
  }
}
