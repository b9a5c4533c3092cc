import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

let collect: (() => void) | undefined;

/**
 * Runs a full, compacting GC of this thread's heap now. The record-builder calls it once its first
 * lists are applied: the parsed API pages are garbage then, and with no allocation after them V8
 * neither collects them nor gives their pages back, so the container kept the peak of the start
 * as its steady RSS (20–60 MiB more, varying run to run). `--expose-gc` is not needed: the flag is
 * set here, and `gc` taken from a fresh context, which V8 makes with the flag in force.
 */
export function fullGc(): void {
  if (!collect) {
    const exposed = (globalThis as { gc?: () => void }).gc;
    if (exposed) collect = exposed;
    else {
      setFlagsFromString('--expose-gc');
      collect = runInNewContext('gc') as () => void;
    }
  }
  collect();
}
