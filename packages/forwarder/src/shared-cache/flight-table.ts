/** Atomics.waitAsync (Node 16+), which the ES2023 lib this repo compiles against does not declare. */
type WaitAsync = (
  typed: Int32Array,
  index: number,
  value: number,
  timeoutMs: number,
) => { async: true; value: Promise<string> } | { async: false; value: string };
const waitAsync = (Atomics as unknown as { waitAsync: WaitAsync }).waitAsync;

/** A claim older than this is taken over: its worker died, or its answer never came. */
export const FLIGHT_STALE_MS = 5_000;

/**
 * Questions out upstream from any worker of the process, in shared memory (pairs of int32: the
 * question's hash, then when it was claimed): the first worker to miss a question claims it and
 * asks; a worker that misses it meanwhile waits for that answer to land in the shared store
 * (Atomics.waitAsync, so its thread serves others meanwhile) instead of asking again. Two
 * questions on one slot do not wait for each other: the second is asked as if no claim were there.
 */
export class FlightTable {
  private readonly mask: number;

  constructor(
    private readonly words: Int32Array,
    private readonly nowMs: () => number,
    /** Longest a waiter waits: past it, it asks on its own. */
    private readonly waitMs: number,
  ) {
    this.mask = words.length / 2 - 1;
  }

  /** undefined: asked by nobody else (claimed now, or its slot is another question's); else when the other's lands. */
  claim(hash: number): Promise<unknown> | undefined {
    const at = (hash & this.mask) * 2;
    const now = Math.floor(this.nowMs()) | 0;
    const held = Atomics.compareExchange(this.words, at, 0, hash);
    if (held === 0) {
      Atomics.store(this.words, at + 1, now);
      return undefined;
    }
    if (held !== hash) return undefined;
    if (((now - Atomics.load(this.words, at + 1)) | 0) > FLIGHT_STALE_MS) {
      Atomics.store(this.words, at + 1, now);
      return undefined;
    }
    const waited = waitAsync(this.words, at, hash, this.waitMs);
    return waited.async ? waited.value : Promise.resolve(waited.value);
  }

  /** The claimed question's answer is in the store (or failed): its waiters look again. */
  land(hash: number): void {
    const at = (hash & this.mask) * 2;
    if (Atomics.compareExchange(this.words, at, hash, 0) === hash) Atomics.notify(this.words, at);
  }
}
