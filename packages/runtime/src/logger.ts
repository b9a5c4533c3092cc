import { describeError } from './errors.js';

export type LogLevel = 'error' | 'warn' | 'info' | 'debug';
const RANK: Record<LogLevel | 'fatal', number> = { fatal: 0, error: 1, warn: 2, info: 3, debug: 4 };

export type LogFields = Record<string, unknown>;

export interface Logger {
  fatal(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  debug(msg: string, fields?: LogFields): void;
  child(fields: LogFields): Logger;
  readonly level: LogLevel;
}

export interface LoggerOptions {
  component: string;
  level?: LogLevel;
  /** Where lines go; defaults to stdout. */
  write?: (line: string) => void;
  now?: () => Date;
}

/** kube-dns's `--v=N` mapped onto our levels: 4 and up turn on debug. */
export function levelFromVerbosity(v: number): LogLevel {
  return v >= 4 ? 'debug' : 'info';
}

/** One JSON object per line: time, level, component, msg, then fields. */
export function createLogger(options: LoggerOptions): Logger {
  const write = options.write ?? ((line: string) => process.stdout.write(line));
  const now = options.now ?? (() => new Date());
  const level = options.level ?? 'info';
  const make = (bound: LogFields): Logger => {
    const emit = (lvl: LogLevel | 'fatal', msg: string, fields?: LogFields) => {
      if (RANK[lvl] > RANK[level]) return;
      const line: LogFields = { time: now().toISOString(), level: lvl, component: options.component, msg, ...bound };
      for (const [k, v] of Object.entries(fields ?? {})) line[k] = k === 'err' ? describeError(v) : v;
      write(`${JSON.stringify(line, jsonSafe)}\n`);
    };
    return {
      level,
      fatal: (m, f) => emit('fatal', m, f),
      error: (m, f) => emit('error', m, f),
      warn: (m, f) => emit('warn', m, f),
      info: (m, f) => emit('info', m, f),
      debug: (m, f) => emit('debug', m, f),
      child: (fields) => make({ ...bound, ...fields }),
    };
  };
  return make({});
}

function jsonSafe(_key: string, value: unknown): unknown {
  if (typeof value === 'bigint') return value.toString();
  if (value instanceof Error) return describeError(value);
  return value;
}

/** A logger that drops everything, for unit tests that do not look at logs. */
export function createSilentLogger(): Logger {
  return createLogger({ component: 'silent', write: () => {}, level: 'error' });
}
