export interface Periodic {
  /** Runs the task now, outside the schedule (a test, a first reading). */
  runNow(): Promise<void>;
  /** No more runs; resolves once the one in flight has ended. */
  stop(): Promise<void>;
}

/**
 * Runs `task` again and again, one run at a time, the first after `firstDelayMs`: each next one
 * `intervalMs` after the previous one started (the probes' pace: a slow run does not push the
 * next ones back), or, with `gapMs`, that long after it ended. Timers do not keep the process up.
 */
export function startPeriodic(
  task: () => Promise<void>,
  options: { intervalMs: number; firstDelayMs?: number; after?: 'start' | 'end' },
): Periodic {
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  let inFlight: Promise<void> = Promise.resolve();
  const schedule = (delayMs: number) => {
    if (stopped) return;
    timer = setTimeout(() => {
      const started = Date.now();
      inFlight = task().finally(() =>
        schedule(
          options.after === 'end' ? options.intervalMs : Math.max(0, options.intervalMs - (Date.now() - started)),
        ),
      );
    }, delayMs);
    timer.unref();
  };
  schedule(options.firstDelayMs ?? options.intervalMs);
  return {
    runNow: () => task(),
    stop: async () => {
      stopped = true;
      if (timer) clearTimeout(timer);
      await inFlight;
    },
  };
}
