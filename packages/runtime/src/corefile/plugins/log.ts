import { type Fqdn, toFqdn } from '@cluster-dns/wire';
import type { DirectiveArgs } from '../args.js';

/** A response's class, as CoreDNS's log and errors plugins sort them (plugin/pkg/response). */
export type ResponseClass = 'all' | 'success' | 'denial' | 'error';

/** One `log` rule: queries under `scope` are logged in `format`, when their answer's class is one of `classes`. */
export interface LogRule {
  readonly scope: Fqdn;
  /** CoreDNS's replacer format ({common} and {combined} already expanded). */
  readonly format: string;
  readonly classes: ReadonlySet<ResponseClass>;
  readonly line: number;
}

/** CoreDNS's formats (plugin/log/log.go). */
export const COMMON_LOG_FORMAT =
  '{remote}:{port} - {>id} "{type} {class} {name} {proto} {size} {>do} {>bufsize}" {rcode} {>rflags} {rsize} {duration}';
export const COMBINED_LOG_FORMAT = `${COMMON_LOG_FORMAT} "{>opcode}"`;

const CLASSES: readonly ResponseClass[] = ['all', 'success', 'denial', 'error'];

/**
 * `log [NAMES...] [FORMAT] { class CLASSES... }` as coredns/coredns plugin/log/setup.go reads it:
 * no argument logs everything; one argument is a name (even one holding a brace, as CoreDNS
 * reads it); with more, a last argument holding `{` is the format.
 */
export function setupLog(a: DirectiveArgs): LogRule[] {
  const args = [...a.directive.args];
  let format = COMMON_LOG_FORMAT;
  let names: string[];
  if (args.length === 0) names = ['.'];
  else if (args.length === 1) names = args;
  else {
    if ((args.at(-1) as string).includes('{'))
      format = (args.pop() as string)
        .replaceAll('{common}', COMMON_LOG_FORMAT)
        .replaceAll('{combined}', COMBINED_LOG_FORMAT);
    names = args;
  }
  const classes = new Set<ResponseClass>();
  for (const d of a.directive.block ?? []) {
    const s: DirectiveArgs = a.sub(d);
    if (d.name !== 'class') s.fail(`unknown property '${d.name}'`);
    if (d.args.length === 0) s.fail('class needs at least one of all, success, denial, error');
    for (const c of d.args) classes.add(s.oneOf(c, CLASSES, 'the class'));
  }
  if (classes.size === 0) classes.add('all');
  return names.map((name) => ({
    scope: toFqdn(name.endsWith('.') ? name : `${name}.`),
    format,
    classes,
    line: a.directive.line,
  }));
}
