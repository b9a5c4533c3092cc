export interface WaitForOptions {
  timeoutMs?: number;
  intervalMs?: number;
  /** What is awaited, for the timeout's message: "the forwarder to run out of descriptors". */
  what?: string;
  /**
   * What was seen instead, read when the wait times out (the last log lines of the process under
   * test, a count against its bound), so a failure says why without a rerun.
   */
  seen?: () => unknown;
}

/**
 * Polls `check` until it returns a value other than undefined/false, or throws after `timeoutMs`,
 * naming what it waited for, what `check` returned or threw last, and what `seen` reports. The
 * timeout error is made before waiting so its stack names the caller.
 */
export async function waitFor<T>(
  check: () => T | undefined | false | Promise<T | undefined | false>,
  options: WaitForOptions = {},
): Promise<T> {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const error = new Error(`timed out after ${timeoutMs} ms waiting for ${options.what ?? 'a condition'}`);
  const deadline = Date.now() + timeoutMs;
  let lastProblem: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined && value !== false) return value;
      lastProblem = undefined;
    } catch (problem) {
      lastProblem = problem;
    }
    if (Date.now() > deadline) {
      if (lastProblem) {
        error.cause = lastProblem;
        error.message += `; the check last threw: ${(lastProblem as Error)?.message ?? String(lastProblem)}`;
      }
      if (options.seen) error.message += `; seen instead: ${describe(options.seen)}`;
      throw error;
    }
    await new Promise<void>((resolve) => setTimeout(resolve, options.intervalMs ?? 50));
  }
}

function describe(seen: () => unknown): string {
  try {
    const value = seen();
    return typeof value === 'string' ? value : JSON.stringify(value);
  } catch (problem) {
    return `(could not be read: ${(problem as Error)?.message ?? String(problem)})`;
  }
}
