import { describe, expect, it } from 'vitest';
import { startPeriodic } from './periodic.js';

describe('startPeriodic', () => {
  it('runs one at a time, again and again, and stop() waits for the run in flight', async () => {
    let running = 0;
    let most = 0;
    let runs = 0;
    let release: () => void = () => {};
    let enough: () => void = () => {};
    const threeRuns = new Promise<void>((r) => {
      enough = r;
    });
    const loop = startPeriodic(
      async () => {
        running++;
        most = Math.max(most, running);
        runs++;
        if (runs === 3) {
          enough();
          await new Promise<void>((r) => {
            release = r;
          });
        }
        running--;
      },
      { intervalMs: 1, firstDelayMs: 0 },
    );
    await threeRuns;
    let stopped = false;
    const stopping = loop.stop().then(() => {
      stopped = true;
    });
    await new Promise((r) => setImmediate(r));
    // The third run is still in flight: stop() has not resolved.
    expect(stopped).toBe(false);
    release();
    await stopping;
    expect(most).toBe(1);
    expect(runs).toBe(3);
  });
});
