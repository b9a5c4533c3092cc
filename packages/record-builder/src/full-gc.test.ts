import { describe, expect, it } from 'vitest';
import { fullGc } from './full-gc.js';

const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

describe('fullGc', () => {
  it('collects what nothing holds, without node --expose-gc, and can run again', async () => {
    for (let round = 0; round < 2; round++) {
      // A WeakRef's target is kept for the rest of the job that made it: collect in a later turn.
      const refs = Array.from({ length: 100 }, () => new WeakRef({ page: new Array(1000).fill(round) }));
      await nextTurn();
      fullGc();
      await nextTurn();
      expect(refs.filter((r) => r.deref() !== undefined)).toHaveLength(0);
    }
  });
});
