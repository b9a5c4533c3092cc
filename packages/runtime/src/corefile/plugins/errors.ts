import type { DirectiveArgs } from '../args.js';

/** One `consolidate DURATION REGEXP [LEVEL] [show_first]` of `errors`. */
export interface ConsolidateRule {
  readonly periodMs: number;
  readonly pattern: RegExp;
  /** The pattern as written, for the line that reports it. */
  readonly patternText: string;
  readonly level: 'error' | 'warning' | 'info' | 'debug';
  /** Log the first matching error at once, then count the rest for the period. */
  readonly showFirst: boolean;
}

/** `errors` (coredns/coredns plugin/errors): the errors the plugins after it return, logged. */
export interface ErrorsConfig {
  readonly consolidate: readonly ConsolidateRule[];
  readonly stacktrace: boolean;
  readonly line: number;
}

const LEVELS = ['warning', 'error', 'info', 'debug'] as const;

/**
 * A Go RE2 pattern as a JavaScript one: named groups `(?P<name>…)` become `(?<name>…)`, a leading
 * `(?i)` the `i` flag, `\A` and `\z` the anchors. The two agree on what Corefiles' patterns use.
 */
export function goRegex(a: DirectiveArgs, raw: string, flags = ''): RegExp {
  if (raw.length > 10_000) a.fail(`regex pattern too long: ${raw.length} > 10000`);
  let source = raw
    .replace(/\(\?P</g, '(?<')
    .replace(/\\A/g, '^')
    .replace(/\\z/g, '$');
  let f = flags;
  const inline = /^\(\?([imsU]+)\)/.exec(source);
  if (inline) {
    source = source.slice(inline[0].length);
    for (const c of inline[1] as string) if ((c === 'i' || c === 's' || c === 'm') && !f.includes(c)) f += c;
  }
  try {
    return new RegExp(source, f);
  } catch (error) {
    return a.fail(`${JSON.stringify(raw)} is not a regular expression: ${(error as Error).message}`);
  }
}

/** `errors [stdout] { stacktrace; consolidate DURATION REGEXP [LEVEL] [show_first] }`. */
export function setupErrors(a: DirectiveArgs): ErrorsConfig {
  const [to] = a.count(0, 1, 'errors [stdout]');
  if (to !== undefined && to !== 'stdout') a.fail(`invalid log file: ${to}`);
  const consolidate: ConsolidateRule[] = [];
  let stacktrace = false;
  for (const d of a.directive.block ?? []) {
    const s: DirectiveArgs = a.sub(d);
    if (d.name === 'stacktrace') {
      stacktrace = true;
      continue;
    }
    if (d.name !== 'consolidate') s.fail(`unknown field ${d.name}`);
    const [period, regex, ...options] = s.count(2, 4, 'consolidate DURATION REGEXP [LEVEL] [show_first]');
    let level: ConsolidateRule['level'] | undefined;
    let showFirst = false;
    for (const option of options) {
      if ((LEVELS as readonly string[]).includes(option)) {
        if (level) s.fail('multiple log levels specified in consolidate');
        if (showFirst) s.fail('log level must come before show_first in consolidate');
        level = option as ConsolidateRule['level'];
      } else if (option === 'show_first') showFirst = true;
      else s.fail(`unknown option in consolidate: ${option}`);
    }
    consolidate.push({
      periodMs: s.durationMs(period, 'DURATION'),
      pattern: goRegex(s, regex as string),
      patternText: regex as string,
      level: level ?? 'error',
      showFirst,
    });
  }
  return { consolidate, stacktrace, line: a.directive.line };
}
