import { QTYPE, typeFromName } from '@cluster-dns/wire';
import type { DirectiveArgs } from '../args.js';
import type { Directive } from '../parse.js';
import { goRegex } from './errors.js';

export type NameMatch = 'exact' | 'prefix' | 'suffix' | 'substring' | 'regex';

/** A regex rewrite of names in a response: CoreDNS's `answer name FROM TO` and `answer value FROM TO`. */
export interface RegexRewrite {
  readonly from: RegExp;
  /** With `{1}`… for the groups. */
  readonly to: string;
}

/** One `rewrite` rule (coredns/coredns plugin/rewrite), the fields we take. */
export type RewriteRule =
  | {
      readonly field: 'name';
      readonly match: NameMatch;
      /** Lowercased with a trailing dot, as CoreDNS normalises it (a regex's pattern as written). */
      readonly from: string;
      readonly to: string;
      /** The regex of a `regex` match. */
      readonly pattern: RegExp | undefined;
      /** `answer auto`: names in the answer mapped back (always for `exact`). */
      readonly answerAuto: boolean;
      readonly answerName: RegexRewrite | undefined;
      readonly answerValue: RegexRewrite | undefined;
      readonly stop: boolean;
      readonly line: number;
    }
  | {
      readonly field: 'type';
      readonly from: number;
      readonly to: number;
      readonly stop: boolean;
      readonly line: number;
    };

const MATCHES: readonly NameMatch[] = ['exact', 'prefix', 'suffix', 'substring', 'regex'];

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

function nameRule(a: DirectiveArgs, args: readonly string[], stop: boolean): RewriteRule {
  const rest = [...args];
  let match: NameMatch = 'exact';
  if (MATCHES.includes(rest[0] as NameMatch) && rest.length >= 3) match = rest.shift() as NameMatch;
  const [from, to, ...options] = rest;
  if (from === undefined || to === undefined)
    a.fail('expected name [exact|prefix|suffix|substring|regex] FROM TO [answer …]');
  let answerAuto = match === 'exact';
  let answerName: RegexRewrite | undefined;
  let answerValue: RegexRewrite | undefined;
  while (options.length) {
    const [answer, kind, x, y] = options;
    if (answer !== 'answer') a.fail(`expected "answer", got ${JSON.stringify(answer)}`);
    if (kind === 'auto') {
      answerAuto = true;
      options.splice(0, 2);
    } else if ((kind === 'name' || kind === 'value') && x !== undefined && y !== undefined) {
      const rule = { from: regex(a, x), to: y };
      if (kind === 'name') answerName = rule;
      else answerValue = rule;
      options.splice(0, 4);
    } else a.fail('expected answer auto, answer name FROM TO or answer value FROM TO');
  }
  return {
    field: 'name',
    match,
    from: match === 'regex' ? from : normalised(from),
    to: normalised(to),
    pattern: match === 'regex' ? regex(a, from) : undefined,
    answerAuto,
    answerName,
    answerValue,
    stop,
    line: a.directive.line,
  };
}

function typeOf(a: DirectiveArgs, raw: string | undefined): number {
  const type = raw === undefined ? undefined : typeFromName(raw.toUpperCase());
  if (type === undefined || type === QTYPE.OPT) a.fail(`${JSON.stringify(raw ?? '')} is not a record type`);
  return type;
}

/** One `rewrite` line, or its block form (`rewrite stop { name regex … ; answer name … }`). */
export function setupRewrite(a: DirectiveArgs): RewriteRule {
  const args = [...a.directive.args];
  let stop = true;
  if (args[0] === 'continue' || args[0] === 'stop') stop = args.shift() === 'stop';
  if (a.directive.block) {
    if (args.length) a.fail('a rewrite with a { … } block takes nothing but continue or stop before it');
    const [name, ...answers] = a.directive.block as [Directive?, ...Directive[]];
    if (name?.name !== 'name' || answers.some((d) => d.name !== 'answer'))
      a.fail('its block is a name rule, optionally followed by answer rules');
    return nameRule(a.sub(name), [...name.args, ...answers.flatMap((d) => ['answer', ...d.args])], stop);
  }
  const [field, ...rest] = args;
  if (field === 'name') return nameRule(a, rest, stop);
  if (field === 'type') {
    if (rest.length !== 2) a.fail('expected type FROM TO');
    return { field: 'type', from: typeOf(a, rest[0]), to: typeOf(a, rest[1]), stop, line: a.directive.line };
  }
  return a.fail(`field ${JSON.stringify(field ?? '')} is not supported (name and type are)`);
}
