import { classFromText, type Fqdn, RCODE, typeFromText } from '@cluster-dns/wire';
import type { DirectiveArgs } from '../args.js';
import { type CompiledTemplate, compileTemplate, type KnownFields, TemplateSyntaxError } from '../go-template.js';
import { RCODE_BY_NAME } from '../rcode-names.js';
import { goRegex } from './errors.js';

/** One `template CLASS TYPE [ZONE...] { … }` (coredns/coredns plugin/template). */
export interface TemplateConfig {
  /** QCLASS.ANY and QTYPE.ANY match every class and type. */
  readonly qclass: number;
  readonly qtype: number;
  /** The zones it answers in; undefined: the block's. */
  readonly zones: readonly Fqdn[] | undefined;
  /** `match REGEX...`: any may match the name (with the trailing dot); none given: everything. */
  readonly match: readonly RegExp[];
  readonly answer: readonly CompiledTemplate[];
  readonly additional: readonly CompiledTemplate[];
  readonly authority: readonly CompiledTemplate[];
  readonly rcode: number;
  /** `ederror CODE [REASON]`: an Extended DNS Error (RFC 8914) on the answer. */
  readonly ederror: { readonly code: number; readonly reason: string | undefined } | undefined;
  /** `fallthrough [ZONES]`: a name the regexes do not match goes on; undefined: SERVFAIL, as CoreDNS. */
  readonly fallthrough: readonly Fqdn[] | undefined;
  readonly line: number;
}

/** What a template may read (CoreDNS's templateData). */
export const TEMPLATE_FIELDS: KnownFields = {
  Zone: true,
  Name: true,
  Regex: true,
  Match: true,
  Group: true,
  Class: true,
  Type: true,
  Remote: true,
  Meta: true,
  Var: true,
  Question: { Name: true, Qtype: true, Qclass: true },
  Message: { Id: true, Question: true, Rcode: true, Opcode: true },
};

/** `class`: Go's dns.StringToClass (IN, CH, HS, NONE, ANY). */
function classOf(a: DirectiveArgs, raw: string | undefined): number {
  const qclass = raw === undefined ? undefined : classFromText(raw);
  if (qclass === undefined || raw !== raw?.toUpperCase() || /^CLASS/.test(raw ?? ''))
    return a.fail(`invalid query class ${raw ?? ''}`);
  return qclass;
}

function typeOf(a: DirectiveArgs, raw: string | undefined): number {
  const qtype = raw === undefined ? undefined : typeFromText(raw);
  if (qtype === undefined || raw !== raw?.toUpperCase() || /^TYPE/.test(raw ?? ''))
    return a.fail(`invalid RR class ${raw ?? ''}`);
  return qtype;
}

function templates(s: DirectiveArgs, what: string): CompiledTemplate[] {
  if (s.directive.args.length === 0) s.fail(`${what} needs at least one template`);
  return s.directive.args.map((text) => {
    try {
      const compiled = compileTemplate(text, TEMPLATE_FIELDS);
      for (const field of compiled.unknown)
        s.warn(`${field} is not a field of a template's data: the template fails (SERVFAIL) when it runs`);
      return compiled;
    } catch (error) {
      if (error instanceof TemplateSyntaxError) return s.fail(`could not compile template: ${text}: ${error.message}`);
      throw error;
    }
  });
}

export function setupTemplate(a: DirectiveArgs): TemplateConfig {
  const [classArg, typeArg, ...zoneArgs] = a.directive.args;
  if (classArg === undefined || typeArg === undefined) a.fail('expected template CLASS TYPE [ZONE...]');
  const qclass = classOf(a, classArg);
  const qtype = typeOf(a, typeArg);
  const match: RegExp[] = [];
  let answer: CompiledTemplate[] = [];
  let additional: CompiledTemplate[] = [];
  let authority: CompiledTemplate[] = [];
  let rcode: number = RCODE.NOERROR;
  let ederror: TemplateConfig['ederror'];
  let fallthrough: Fqdn[] | undefined;
  for (const d of a.directive.block ?? []) {
    const s: DirectiveArgs = a.sub(d);
    switch (d.name) {
      case 'match':
        if (d.args.length === 0) s.fail('match needs at least one regex');
        for (const raw of d.args) match.push(goRegex(s, raw));
        break;
      case 'answer':
        answer = [...answer, ...templates(s, 'answer')];
        break;
      case 'additional':
        additional = [...additional, ...templates(s, 'additional')];
        break;
      case 'authority':
        authority = [...authority, ...templates(s, 'authority')];
        break;
      case 'rcode': {
        const [raw] = s.count(1, 1, 'rcode RCODE');
        const code = RCODE_BY_NAME[raw as string];
        if (code === undefined) s.fail(`unknown rcode ${raw}`);
        rcode = code;
        break;
      }
      case 'ederror': {
        const [code, reason] = s.count(1, 2, 'ederror CODE [REASON]');
        ederror = { code: s.integer(code, 'CODE', 0, 65_535), reason };
        break;
      }
      case 'fallthrough':
        fallthrough = s.zones(d.args);
        break;
      case 'upstream':
        // CoreDNS reads and drops it ("remove soon"): CNAME targets are looked up through the chain.
        break;
      case 'var':
      case 'expr':
        s.fail(`${d.name} (expr-lang, CoreDNS's master branch) is not supported; use match groups`);
        break;
      default:
        s.fail(`unknown property '${d.name}'`);
    }
  }
  return {
    qclass,
    qtype,
    zones: zoneArgs.length ? a.zones(zoneArgs) : undefined,
    match: match.length ? match : [/.*/],
    answer,
    additional,
    authority,
    rcode,
    ederror,
    fallthrough,
    line: a.directive.line,
  };
}
