// Upstream exchanges end early when the asker gives up (the forwarder's route share pushes out its
// oldest question for a newer one): the socket or connection slot is freed at once, not at the
// timeout, so a flood towards a dead server holds no more sockets than its share. Not an
// AbortSignal: one of those per upstream question (an EventTarget, a listener added and removed
// per try) cost a twentieth of a miss; a question has one exchange at a time, so one listener does.

const NOTHING = () => {};

/** Whether, and why, a question was given up; told to the one exchange listening for it. */
export class Cancellation {
  /** Set once cancelled: the error the exchange rejects with. */
  reason: Error | undefined;
  private listener: ((reason: Error) => void) | undefined;

  get cancelled(): boolean {
    return this.reason !== undefined;
  }

  /** Gives the question up: the exchange listening now (if any) is told at once. Safe twice. */
  cancel(reason: Error): void {
    if (this.reason !== undefined) return;
    this.reason = reason;
    const listener = this.listener;
    this.listener = undefined;
    listener?.(reason);
  }

  /**
   * Calls `onCancel` when cancelled (at once if it was), in place of any earlier listener, and
   * returns what stops listening: the exchange calls it when it ends another way.
   */
  listen(onCancel: (reason: Error) => void): () => void {
    if (this.reason !== undefined) {
      onCancel(this.reason);
      return NOTHING;
    }
    this.listener = onCancel;
    return () => {
      if (this.listener === onCancel) this.listener = undefined;
    };
  }
}

/** `cancel?.listen(onCancel)`, or nothing to undo when there is no cancellation. */
export const whenCancelled = (cancel: Cancellation | undefined, onCancel: (reason: Error) => void): (() => void) =>
  cancel === undefined ? NOTHING : cancel.listen(onCancel);
