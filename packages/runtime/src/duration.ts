import { FlagError } from './errors.js';

const UNIT_MS: Record<string, number> = {
  ns: 1e-6,
  us: 1e-3,
  µs: 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

/**
 * Parses a Go duration ("60s", "1m30s", "250ms", "1.5h") into milliseconds, as kube-dns's
 * flags take them. A bare "0" is allowed, as in Go.
 */
export function parseGoDurationMs(text: string, flag = 'duration'): number {
  const expected = 'a Go duration such as 60s, 1m30s or 250ms';
  if (text === '0') return 0;
  const re = /(\d+(?:\.\d+)?|\.\d+)(ns|us|µs|ms|s|m|h)/y;
  let total = 0;
  let pos = 0;
  while (pos < text.length) {
    re.lastIndex = pos;
    const m = re.exec(text);
    if (!m) throw new FlagError(flag, text, expected);
    total += Number(m[1]) * (UNIT_MS[m[2] as string] as number);
    pos = re.lastIndex;
  }
  if (pos === 0) throw new FlagError(flag, text, expected);
  return total;
}

/** Formats milliseconds back into the Go form, for --help defaults and logs. */
export function formatGoDuration(ms: number): string {
  if (ms === 0) return '0s';
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000}h`;
  if (ms % 60_000 === 0) return `${ms / 60_000}m`;
  if (ms % 1000 === 0) return `${ms / 1000}s`;
  return `${ms}ms`;
}
