// Upstream exchanges end early when the asker gives up (the forwarder's route share pushes out its
// oldest question for a newer one): the socket or connection slot is freed at once, not at the
// timeout, so a flood towards a dead server holds no more sockets than its share.

const NOTHING = () => {};

/** Why a signal aborted, as an Error (a bare `abort()` gives a DOMException). */
export const abortReason = (signal: AbortSignal): Error =>
  signal.reason instanceof Error ? signal.reason : new Error(String(signal.reason));

/**
 * Calls `onAbort` once when `signal` aborts (at once if it has), and returns what stops listening:
 * call it when the exchange ends another way, so a long-lived signal does not gather listeners.
 */
export function whenAborted(signal: AbortSignal | undefined, onAbort: (reason: Error) => void): () => void {
  if (signal === undefined) return NOTHING;
  if (signal.aborted) {
    onAbort(abortReason(signal));
    return NOTHING;
  }
  const listener = () => onAbort(abortReason(signal));
  signal.addEventListener('abort', listener, { once: true });
  return () => signal.removeEventListener('abort', listener);
}
