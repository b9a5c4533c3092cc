/**
 * Polls `check` until it returns a value other than undefined/false, or throws after `timeoutMs`.
 * The timeout error is made before waiting so its stack names the caller.
 */
export async function waitFor<T>(
  check: () => T | undefined | false | Promise<T | undefined | false>,
  options: { timeoutMs?: number; intervalMs?: number; what?: string } = {},
): Promise<T> {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const error = new Error(`timed out after ${timeoutMs} ms waiting for ${options.what ?? 'a condition'}`);
  const deadline = Date.now() + timeoutMs;
  let lastProblem: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined && value !== false) return value;
    } catch (problem) {
      lastProblem = problem;
    }
    if (Date.now() > deadline) {
      if (lastProblem) error.cause = lastProblem;
      throw error;
    }
    await new Promise((r) => setTimeout(r, options.intervalMs ?? 50));
  }
}
