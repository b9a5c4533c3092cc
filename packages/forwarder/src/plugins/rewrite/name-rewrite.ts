import type { Buffer } from 'node:buffer';
import type { RegexRewrite, RewriteRule } from '@cluster-dns/runtime';
import {
  type DecodedRr,
  decodeMessage,
  type Fqdn,
  flagsWord,
  isValidName,
  MessageWriter,
  QTYPE,
  toFqdn,
} from '@cluster-dns/wire';

/** How one response name is mapped back: a plain swap (auto), or a regex (`answer name|value`). */
type NameMap = (name: string) => string;

/** What the rules made of a question, and how to map its answer back. */
/** The rewrite rules of one server block: they apply to the names that block serves. */
export interface ScopedRewrites {
  readonly zones: readonly Fqdn[];
  readonly rules: readonly RewriteRule[];
}

export interface Rewritten {
  readonly name: Fqdn;
  readonly qtype: number;
  /** Applied, in order, to the owner names of the answer and additional records. */
  readonly names: readonly NameMap[];
  /** Applied to the names inside records (CNAME, PTR, NS, MX, SRV targets). */
  readonly values: readonly NameMap[];
}

/** `{1}` … in TO replaced by the groups, as CoreDNS does. */
function fill(to: string, groups: RegExpExecArray): string {
  return groups.reduce((out, group, i) => out.replaceAll(`{${i}}`, group ?? ''), to);
}

function regexMap(rule: RegexRewrite): NameMap {
  return (name) => {
    const groups = rule.from.exec(name);
    if (!groups) return name;
    const next = fill(rule.to, groups);
    return next.endsWith('.') ? next : `${next}.`;
  };
}

/** Every whole-label-or-not occurrence of `from` in a name replaced by `to` (CoreDNS's remap rewriter). */
const swap =
  (from: string, to: string): NameMap =>
  (name) =>
    name.toLowerCase().includes(from) ? name.toLowerCase().replaceAll(from, to) : name;

/** A suffix swapped back (CoreDNS's suffix rewriter reversed). */
const swapSuffix =
  (from: string, to: string): NameMap =>
  (name) =>
    name.toLowerCase().endsWith(from) ? name.toLowerCase().slice(0, -from.length) + to : name;

/** One name rule on `name`: the new name, or undefined when it does not match. */
function rewriteName(rule: Extract<RewriteRule, { field: 'name' }>, name: string): string | undefined {
  switch (rule.match) {
    case 'exact':
      return name === rule.from ? rule.to : undefined;
    case 'prefix':
      return name.startsWith(rule.from) ? rule.to + name.slice(rule.from.length) : undefined;
    case 'suffix':
      return name.endsWith(rule.from) ? name.slice(0, -rule.from.length) + rule.to : undefined;
    case 'substring':
      return name.includes(rule.from) ? name.replaceAll(rule.from, rule.to) : undefined;
    case 'regex': {
      const groups = rule.pattern?.exec(name);
      return groups ? fill(rule.to, groups) : undefined;
    }
  }
}

/**
 * Applies a block's rewrite rules to a question, as CoreDNS's rewrite does: in order, each on the
 * question as the rules before left it; a matching `stop` rule ends the list. Undefined when none
 * matched, or when one made a name that is not a domain name (CoreDNS then answers an error).
 */
export function rewriteQuestion(
  rules: readonly RewriteRule[],
  name: Fqdn,
  qtype: number,
): Rewritten | 'invalid' | undefined {
  let current: string = name;
  let type = qtype;
  let matched = false;
  const names: NameMap[] = [];
  const values: NameMap[] = [];
  for (const rule of rules) {
    if (rule.field === 'type') {
      if (type !== rule.from) continue;
      type = rule.to;
    } else {
      const next = rewriteName(rule, current);
      if (next === undefined) continue;
      if (!isValidName(next)) return 'invalid';
      if (rule.answerAuto) {
        const back = rule.match === 'suffix' ? swapSuffix(rule.to, rule.from) : swap(next.toLowerCase(), current);
        names.unshift(back);
        values.unshift(back);
      }
      if (rule.answerName) names.unshift(regexMap(rule.answerName));
      if (rule.answerValue) values.unshift(regexMap(rule.answerValue));
      current = next;
    }
    matched = true;
    if (rule.stop) break;
  }
  if (!matched) return undefined;
  return { name: toFqdn(current), qtype: type, names, values };
}

const TARGETS = new Set<number>([QTYPE.CNAME, QTYPE.PTR, QTYPE.NS, QTYPE.MX, QTYPE.SRV]);

/**
 * The reply to the rewritten question made the reply to the asked one: the question as asked
 * (canonical case), owner names of the answer and additional records mapped back, and the targets
 * of name-valued records. Records the codec cannot model are copied as they are.
 */
export function mapReply(
  reply: Buffer,
  question: { name: Fqdn; qtype: number; qclass: number },
  how: Rewritten,
): Buffer {
  const decoded = decodeMessage(reply);
  const owner = (rr: DecodedRr): DecodedRr => {
    const name = how.names.reduce((n, map) => map(n), rr.name);
    if (!('target' in rr) || typeof rr.target !== 'string' || !TARGETS.has(rr.type))
      return { ...rr, name } as DecodedRr;
    const target = how.values.reduce((t, map) => map(t), rr.target);
    return { ...rr, name, target } as DecodedRr;
  };
  const writer = new MessageWriter(reply.length + 64).question(question.name, question.qtype, question.qclass);
  for (const rr of decoded.answers) writer.record(1, owner(rr));
  for (const rr of decoded.authorities) writer.record(2, rr);
  for (const rr of decoded.additionals) if (rr.type !== QTYPE.OPT) writer.record(3, owner(rr));
  return writer.finish(decoded.id, flagsWord(decoded.flags));
}
