/** How long a holder may keep the lock before a waiter takes it: only a thread that died holding it does. */
const STEAL_AFTER_MS = 1_000;

/**
 * A lock over one int32 of shared memory, for sections of a few microseconds (a record written, an
 * index scanned). It spins rather than Atomics.wait()s, which the main thread may not call. A
 * worker killed while holding it (terminate(), an uncaught error) would hold every writer
 * forever: a waiter takes it after STEAL_AFTER_MS, each thread timing its own wait.
 */
export class SpinLock {
  /** This holder's mark in the lock word: never 0 (free). */
  private readonly mark = (Math.floor(Math.random() * 0x7ffffffe) + 1) | 0;

  constructor(
    private readonly words: Int32Array,
    private readonly at: number,
  ) {}

  acquire(): void {
    if (Atomics.compareExchange(this.words, this.at, 0, this.mark) === 0) return;
    const since = Date.now();
    for (let spins = 1; ; spins++) {
      const held = Atomics.compareExchange(this.words, this.at, 0, this.mark);
      if (held === 0) return;
      if ((spins & 0x3ff) === 0 && Date.now() - since > STEAL_AFTER_MS) {
        if (Atomics.compareExchange(this.words, this.at, held, this.mark) === held) return;
      }
    }
  }

  release(): void {
    Atomics.compareExchange(this.words, this.at, this.mark, 0);
  }
}
