import { Buffer } from 'node:buffer';
import type { NameMatcher, NameRule, RegexRewrite, RewriteRule } from '@cluster-dns/runtime';
import {
  type DecodedRr,
  decodeMessage,
  type EdnsOption,
  type Fqdn,
  flagsWord,
  isValidName,
  MessageWriter,
  QCLASS,
  QTYPE,
  readName,
  toFqdn,
  writeName,
} from '@cluster-dns/wire';
import { applyEdns0, passedOptions, type RewriteAsker } from './edns0-rewrite.js';

/** How one response name is mapped back: a plain swap (auto), or a regex (`answer name|value`). */
type NameMap = (name: string) => string;

/** The rewrite rules of one server block: they apply to the names that block serves. */
export interface ScopedRewrites {
  readonly zones: readonly Fqdn[];
  readonly rules: readonly RewriteRule[];
}

/** What the rules made of a question, and how to make its answer the answer to the question asked. */
export interface Rewritten {
  readonly name: Fqdn;
  readonly qtype: number;
  readonly qclass: number;
  /** Applied, in order, to the owner names of every record of the answer. */
  readonly names: readonly NameMap[];
  /** Applied to the names inside records (CNAME, PTR, NS, MX, SRV targets, SOA's primary). */
  readonly values: readonly NameMap[];
  /** TTL ranges every record is brought into, in order. */
  readonly ttls: readonly { readonly min: number; readonly max: number }[];
  /** RCODEs swapped, in order. */
  readonly rcodes: readonly { readonly from: number; readonly to: number }[];
  /** Set when an edns0 rule applied: the options the question goes on upstream with. */
  readonly options: readonly EdnsOption[] | undefined;
}

/** `{1}` … in TO replaced by the groups, as CoreDNS does. */
function fill(to: string, groups: RegExpExecArray): string {
  return groups.reduce((out, group, i) => out.replaceAll(`{${i}}`, group ?? ''), to);
}

function regexMap(rule: RegexRewrite): NameMap {
  return (name) => {
    const groups = rule.from.exec(name);
    return groups ? fill(rule.to, groups) : name;
  };
}

/** CoreDNS's remap rewriter: the name itself, or a whole-label suffix of it, swapped. */
const remap =
  (from: string, to: string): NameMap =>
  (name) => {
    const lower = name.toLowerCase();
    if (lower === from) return to;
    const i = lower.length - from.length;
    return i > 0 && lower[i - 1] === '.' && lower.endsWith(from) ? name.slice(0, i) + to : name;
  };

/** A suffix swapped back (CoreDNS's suffix rewriter reversed). */
const swapSuffix =
  (from: string, to: string): NameMap =>
  (name) =>
    name.toLowerCase().endsWith(from) ? name.slice(0, name.length - from.length) + to : name;

function matches(m: NameMatcher, name: string): RegExpExecArray | boolean {
  switch (m.match) {
    case 'exact':
      return name === m.from;
    case 'prefix':
      return name.startsWith(m.from);
    case 'suffix':
      return name.endsWith(m.from);
    case 'substring':
      return name.includes(m.from);
    case 'regex':
      return m.pattern?.exec(name) ?? false;
  }
}

/** One name rule on `name`: the new name, or undefined when it does not match. */
function rewriteName(rule: NameRule, name: string): string | undefined {
  const hit = matches(rule, name);
  if (hit === false) return undefined;
  switch (rule.match) {
    case 'exact':
      return rule.to;
    case 'prefix':
      return rule.to + name.slice(rule.from.length);
    case 'suffix':
      return name.slice(0, -rule.from.length) + rule.to;
    case 'substring':
      return name.replaceAll(rule.from, rule.to);
    case 'regex':
      return fill(rule.to, hit as RegExpExecArray);
  }
}

/**
 * Applies a block's rewrite rules to a question, as CoreDNS's rewrite does: in order, each on the
 * question as the rules before left it; a matching `stop` rule ends the list. Undefined when none
 * matched, 'invalid' when one made a name that is not a domain name (CoreDNS then answers
 * SERVFAIL). `asker` is what edns0 rules read; without it they are not applied (the express
 * lane's question: a cached answer is not asked upstream).
 */
export function rewriteQuestion(
  rules: readonly RewriteRule[],
  name: Fqdn,
  qtype: number,
  qclass: number = QCLASS.IN,
  asker?: RewriteAsker,
): Rewritten | 'invalid' | undefined {
  let current: string = name;
  let type = qtype;
  let klass = qclass;
  let matched = false;
  let options: EdnsOption[] | undefined;
  const names: NameMap[] = [];
  const values: NameMap[] = [];
  const ttls: { min: number; max: number }[] = [];
  const rcodes: { from: number; to: number }[] = [];
  for (const rule of rules) {
    switch (rule.field) {
      case 'type':
        if (type !== rule.from) continue;
        type = rule.to;
        break;
      case 'class':
        if (klass !== rule.from) continue;
        klass = rule.to;
        break;
      case 'ttl':
        if (matches(rule.name, current) === false) continue;
        ttls.unshift(rule);
        break;
      case 'rcode':
        if (matches(rule.name, current) === false) continue;
        rcodes.unshift(rule);
        break;
      case 'edns0':
        if (!asker) continue;
        options ??= passedOptions(asker);
        if (!applyEdns0(rule, options, { qname: current, qtype: type }, asker)) continue;
        break;
      case 'name': {
        const next = rewriteName(rule, current);
        if (next === undefined) continue;
        if (!isValidName(next)) return 'invalid';
        // Response rules run last rule first, each rule's own in the order CoreDNS lists them.
        const own: { names: NameMap[]; values: NameMap[] } = { names: [], values: [] };
        if (rule.match === 'suffix' && rule.answerAuto) {
          own.names.push(swapSuffix(rule.to, rule.from));
          own.values.push(swapSuffix(rule.to, rule.from));
        } else if (rule.answerAuto) {
          own.names.push(remap(next.toLowerCase(), current));
          own.values.push(remap(next.toLowerCase(), current));
        }
        if (rule.answerName) own.names.push(regexMap(rule.answerName));
        if (rule.answerValue) own.values.push(regexMap(rule.answerValue));
        names.unshift(...own.names.reverse());
        values.unshift(...own.values.reverse());
        current = next;
        break;
      }
    }
    matched = true;
    if (rule.stop) break;
  }
  if (!matched) return undefined;
  return { name: toFqdn(current), qtype: type, qclass: klass, names, values, ttls, rcodes, options };
}

const clamp = (ttl: number, ranges: Rewritten['ttls']) =>
  ranges.reduce((t, r) => Math.min(Math.max(t, r.min), r.max), ttl);

/**
 * The reply to the rewritten question made the reply to the asked one: the question as asked
 * (canonical case), every record's owner name mapped back as the rules say, and the names inside
 * name-valued records, TTLs brought into range, the RCODE swapped. Records the codec cannot model
 * keep their data as it is.
 */
export function mapReply(
  reply: Buffer,
  question: { name: Fqdn; qtype: number; qclass: number },
  how: Rewritten,
): Buffer {
  const decoded = decodeMessage(reply);
  const mapped = (rr: DecodedRr): DecodedRr => {
    const name = how.names.reduce((n, map) => map(n), rr.name);
    const ttl = clamp(rr.ttl, how.ttls);
    if (rr.type === QTYPE.SOA && rr.soa) {
      const primary = how.values.reduce((t, map) => map(t), rr.soa.primary);
      return { ...rr, name, ttl, soa: { ...rr.soa, primary } } as DecodedRr;
    }
    if (rr.rdata && how.values.length)
      return { ...rr, name, ttl, rdata: mappedRdata(rr.type, rr.rdata, how) } as DecodedRr;
    if (!('target' in rr) || typeof rr.target !== 'string' || !TARGETS.has(rr.type))
      return { ...rr, name, ttl } as DecodedRr;
    const target = how.values.reduce((t, map) => map(t), rr.target);
    return { ...rr, name, ttl, target } as DecodedRr;
  };
  const rcode = how.rcodes.reduce((r, swap) => (r === swap.from ? swap.to : r), decoded.flags.rcode);
  const writer = new MessageWriter(reply.length + 64).question(question.name, question.qtype, question.qclass);
  for (const rr of decoded.answers) writer.record(1, mapped(rr));
  for (const rr of decoded.authorities) writer.record(2, mapped(rr));
  for (const rr of decoded.additionals) if (rr.type !== QTYPE.OPT) writer.record(3, mapped(rr));
  return writer.finish(decoded.id, flagsWord({ ...decoded.flags, rcode }));
}

const TARGETS = new Set<number>([QTYPE.CNAME, QTYPE.PTR, QTYPE.NS, QTYPE.MX, QTYPE.SRV]);
const DNAME = 39;
const NAPTR = 35;

/**
 * The name at the end of a DNAME's or NAPTR's data (its target, its replacement) mapped, for the
 * records the codec keeps as octets; other data as it is. Those names are never compressed
 * (RFC 3597 §4), so they read from the data alone.
 */
function mappedRdata(type: number, rdata: Buffer, how: Rewritten): Buffer {
  let at = 0;
  if (type === NAPTR) {
    at = 4;
    for (let i = 0; i < 3 && at < rdata.length; i++) at += 1 + (rdata[at] as number);
  } else if (type !== DNAME) return rdata;
  try {
    const { name } = readName(rdata, at);
    const mapped = how.values.reduce((t, map) => map(t), name);
    return mapped === name ? rdata : Buffer.concat([rdata.subarray(0, at), writeName(mapped)]);
  } catch {
    return rdata;
  }
}
