import { ClusterDnsError } from '@cluster-dns/wire';

export { ClusterDnsError };

/** A command-line flag or config value that does not parse. Startup exits 2 on it. */
export class FlagError extends ClusterDnsError {
  readonly flag: string;
  readonly value: string | undefined;

  constructor(flag: string, value: string | undefined, expected: string, options: { cause?: unknown } = {}) {
    const shown = value === undefined ? '' : ` ${JSON.stringify(value)}`;
    super('FLAG_INVALID', `invalid value${shown} for ${flag}: expected ${expected}`, {
      ...options,
      hint: `see --help for ${flag}`,
    });
    this.flag = flag;
    this.value = value;
  }
}

/** An argument that names no flag of the table. */
export class UnknownFlagError extends ClusterDnsError {
  constructor(readonly flag: string) {
    super('FLAG_UNKNOWN', `unknown flag: ${flag}`, { hint: 'run with --help to list the flags' });
  }
}

/** Renders an error as the `err` field of a log line: name, code, message, cause. */
export function describeError(error: unknown): Record<string, unknown> {
  if (!(error instanceof Error)) {
    if (typeof error === 'object' && error !== null) return { message: JSON.stringify(error) };
    return { message: String(error) };
  }
  const out: Record<string, unknown> = { name: error.name, message: error.message };
  const code = (error as { code?: unknown }).code;
  if (code !== undefined) out.code = code;
  if (error.cause !== undefined) out.cause = describeError(error.cause);
  return out;
}
