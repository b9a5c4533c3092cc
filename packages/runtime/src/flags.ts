import { formatGoDuration, parseGoDurationMs } from './duration.js';
import { FlagError, UnknownFlagError } from './errors.js';

/** One row of a process's flag table: it drives parsing, validation and --help. */
export interface FlagDef<T> {
  readonly help: string;
  readonly defaultValue: T;
  /** Shown in --help instead of the default value when set. */
  readonly defaultText?: string;
  /** `value` flags need an argument; `bool` flags take an optional `=true|false`. */
  readonly takes: 'value' | 'bool';
  readonly valueName: string;
  readonly repeatable: boolean;
  /** Single-letter aliases (`p` for `-p`) or other long names. */
  readonly aliases: readonly string[];
  /** Parses one occurrence; for repeatable flags it receives the values seen so far. */
  parse(raw: string, flag: string, previous: T): T;
}

type FlagTable = Record<string, FlagDef<unknown>>;
export type FlagValues<Table extends FlagTable> = {
  -readonly [K in keyof Table]: Table[K] extends FlagDef<infer T> ? T : never;
};

interface Common {
  aliases?: readonly string[];
  valueName?: string;
  defaultText?: string;
}

function def<T>(
  partial: Omit<FlagDef<T>, 'aliases' | 'valueName' | 'repeatable'> & Common & { repeatable?: boolean },
): FlagDef<T> {
  return {
    ...partial,
    aliases: partial.aliases ?? [],
    valueName: partial.valueName ?? 'value',
    repeatable: partial.repeatable ?? false,
  };
}

/** Builders for flag table rows. */
export const flag = {
  string(help: string, defaultValue: string, options: Common & { check?: (v: string) => string | undefined } = {}) {
    return def<string>({
      ...options,
      help,
      defaultValue,
      takes: 'value',
      valueName: options.valueName ?? 'string',
      parse: (raw, name) => {
        const problem = options.check?.(raw);
        if (problem !== undefined) throw new FlagError(name, raw, problem);
        return raw;
      },
    });
  },
  int(help: string, defaultValue: number, options: Common & { min?: number; max?: number } = {}) {
    const min = options.min ?? Number.MIN_SAFE_INTEGER;
    const max = options.max ?? Number.MAX_SAFE_INTEGER;
    return def<number>({
      ...options,
      help,
      defaultValue,
      takes: 'value',
      valueName: options.valueName ?? 'int',
      parse: (raw, name) => {
        const n = Number(raw);
        if (!/^-?\d+$/.test(raw) || n < min || n > max) {
          throw new FlagError(name, raw, `an integer from ${min} to ${max}`);
        }
        return n;
      },
    });
  },
  /** `--x`, `--x=true|false` (Go's and pflag's spellings); `defaultValue` true for flags such as node-cache's `-setupiptables`. */
  bool(help: string, options: Common & { defaultValue?: boolean } = {}) {
    return def<boolean>({
      ...options,
      help,
      defaultValue: options.defaultValue ?? false,
      defaultText: options.defaultText ?? (options.defaultValue ? 'true' : undefined),
      takes: 'bool',
      valueName: 'bool',
      parse: (raw, name) => {
        if (raw === 'true' || raw === '1' || raw === '') return true;
        if (raw === 'false' || raw === '0') return false;
        throw new FlagError(name, raw, 'true or false');
      },
    });
  },
  /** A Go-syntax duration, parsed to milliseconds. */
  duration(help: string, defaultMs: number, options: Common = {}) {
    return def<number>({
      ...options,
      help,
      defaultValue: defaultMs,
      defaultText: options.defaultText ?? formatGoDuration(defaultMs),
      takes: 'value',
      valueName: options.valueName ?? 'duration',
      parse: (raw, name) => parseGoDurationMs(raw, name),
    });
  },
  enumOf<const V extends string>(help: string, values: readonly V[], defaultValue: V, options: Common = {}) {
    return def<V>({
      ...options,
      help,
      defaultValue,
      takes: 'value',
      valueName: options.valueName ?? values.join('|'),
      parse: (raw, name) => {
        if (!(values as readonly string[]).includes(raw)) throw new FlagError(name, raw, `one of ${values.join(', ')}`);
        return raw as V;
      },
    });
  },
  /** A flag given any number of times; each occurrence is parsed by `parseItem`. */
  list<T>(help: string, parseItem: (raw: string, flag: string) => T, options: Common = {}) {
    return def<T[]>({
      ...options,
      help,
      defaultValue: [],
      defaultText: options.defaultText ?? 'none',
      takes: 'value',
      repeatable: true,
      parse: (raw, name, previous) => [...previous, parseItem(raw, name)],
    });
  },
  /** A value flag with its own parser, such as an address or a probe spec. */
  custom<T>(help: string, defaultValue: T, parse: (raw: string, flag: string) => T, options: Common = {}) {
    return def<T>({ ...options, help, defaultValue, takes: 'value', parse: (raw, name) => parse(raw, name) });
  },
  /** Accepted for compatibility with existing manifests and otherwise ignored. */
  accepted(help: string, options: Common & { takesValue?: boolean } = {}) {
    return def<boolean>({
      ...options,
      help,
      defaultValue: false,
      defaultText: '',
      takes: options.takesValue ? 'value' : 'bool',
      repeatable: true,
      parse: () => true,
    });
  },
};

export interface ParsedFlags<Table extends FlagTable> {
  values: FlagValues<Table>;
  /** Names of the flags given on the command line. */
  given: ReadonlySet<keyof Table & string>;
  help: boolean;
}

/**
 * Parses argv against a flag table. It takes the forms kube-dns (pflag), dnsmasq and Go's flag
 * package accept: `--name=value`, `--name value`, `-name=value`, `-x value`, `-xvalue`, `--bool`,
 * `--bool=false`. A bare `--` is skipped. Anything else throws a FlagError or UnknownFlagError
 * naming the argument.
 */
export function parseFlags<Table extends FlagTable>(table: Table, argv: readonly string[]): ParsedFlags<Table> {
  const byName = new Map<string, string>();
  for (const [name, row] of Object.entries(table)) {
    byName.set(name, name);
    for (const alias of row.aliases) byName.set(alias, name);
  }
  const values: Record<string, unknown> = {};
  for (const [name, row] of Object.entries(table)) values[name] = row.defaultValue;
  const given = new Set<string>();
  let help = false;

  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === '--help' || arg === '-h' || arg === '-help') {
      help = true;
      continue;
    }
    // `pnpm demo -- --flag` hands the `--` on; with no positional arguments it only separates.
    if (arg === '--') continue;
    if (!arg.startsWith('-') || arg === '-') throw new UnknownFlagError(arg);
    const body = arg.replace(/^--?/, '');
    const eq = body.indexOf('=');
    let key = eq === -1 ? body : body.slice(0, eq);
    let inline: string | undefined = eq === -1 ? undefined : body.slice(eq + 1);
    // `-p53`: a single-dash single-letter alias glued to its value.
    if (!byName.has(key) && !arg.startsWith('--') && inline === undefined && byName.has(body.slice(0, 1))) {
      key = body.slice(0, 1);
      inline = body.slice(1);
    }
    const name = byName.get(key);
    if (name === undefined) throw new UnknownFlagError(eq === -1 ? arg : arg.slice(0, arg.indexOf('=')));
    const row = table[name] as FlagDef<unknown>;
    const shown = `--${name}`;
    let raw: string;
    if (row.takes === 'bool') {
      raw = inline ?? 'true';
    } else if (inline !== undefined) {
      raw = inline;
    } else {
      const next = argv[i + 1];
      if (next === undefined) throw new FlagError(shown, undefined, `a ${row.valueName} after ${shown}`);
      raw = next;
      i++;
    }
    if (given.has(name) && !row.repeatable) {
      values[name] = row.parse(raw, shown, row.defaultValue);
    } else {
      values[name] = row.parse(raw, shown, values[name]);
    }
    given.add(name);
  }
  return { values: values as FlagValues<Table>, given: given as Set<keyof Table & string>, help };
}

/** The --help text: usage line, then one entry per flag with its default. */
export function formatFlagHelp(program: string, summary: string, table: FlagTable): string {
  const lines = [`Usage: ${program} [flags]`, '', summary, '', 'Flags:'];
  for (const [name, row] of Object.entries(table)) {
    const aliases = row.aliases.map((a) => (a.length === 1 ? `-${a}` : `--${a}`));
    const head = [...aliases, row.takes === 'bool' ? `--${name}` : `--${name}=<${row.valueName}>`].join(', ');
    const dflt = row.defaultText ?? (row.takes === 'bool' ? '' : JSON.stringify(row.defaultValue));
    const repeat = row.repeatable && row.takes === 'value' ? ' (repeatable)' : '';
    lines.push(`  ${head}`);
    lines.push(`      ${row.help}${repeat}${dflt ? ` (default ${dflt})` : ''}`);
  }
  lines.push('  -h, --help', '      print this help and exit');
  return `${lines.join('\n')}\n`;
}
