import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { createSharedAnswerMemory, SharedAnswerStore } from '../src/plugins/cache/shared-answer-store.js';

// The shared store under real threads: three worker threads write and read one small store at
// once (the ring goes round many times), and no reply the store confirmed is ever made of a
// record another thread was overwriting. Bounded: each thread stops after its operations.
describe('the shared answer store, hammered by three threads at once', () => {
  it('never confirms a torn read, stays within its bytes, and keeps counting right', async () => {
    const memory = createSharedAnswerMemory({ maxEntries: 400, ringBytes: 64 * 1024 });
    const run = (index: number) =>
      new Promise<{ writes: number; hits: number; torn: number; wrong: number; misses: number }>((resolve, reject) => {
        const worker = new Worker(new URL('./fixtures/store-hammer.mjs', import.meta.url), {
          workerData: { memory, index, names: 600, operations: 60_000 },
        });
        worker.once('message', resolve);
        worker.once('error', reject);
      });
    const results = await Promise.all([0, 1, 2].map(run));
    const total = results.reduce((a, r) => ({
      writes: a.writes + r.writes,
      hits: a.hits + r.hits,
      torn: a.torn + r.torn,
      wrong: a.wrong + r.wrong,
      misses: a.misses + r.misses,
    }));
    expect(total.wrong).toBe(0);
    expect(total.hits).toBeGreaterThan(10_000);
    const store = new SharedAnswerStore(memory);
    expect(store.usedBytes).toBeLessThanOrEqual(store.ringBytes);
    expect(store.size).toBeLessThanOrEqual(400);
    expect(store.counts.insertions).toBe(total.writes);
    // Every insertion is still held, or was replaced or pushed out (evicted while fresh).
    expect(store.counts.evictions).toBeLessThanOrEqual(total.writes - store.size);
  }, 60_000);
});
