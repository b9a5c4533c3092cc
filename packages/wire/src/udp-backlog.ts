import { performance } from 'node:perf_hooks';

/**
 * How many datagrams libuv reads from a UDP socket in one go before it lets the event loop turn
 * (uv__udp_recvmsg: up to 32, plus the read that finds the queue empty). A turn that reads this
 * many left more waiting in the kernel.
 */
export const LIBUV_UDP_BATCH = 32;
/** How often the event loop's lag is sampled: a stall longer than the shed bound shows at the next sample. */
const LAG_SAMPLE_MS = 50;

/**
 * Tells when a UDP socket's queries have been waiting in the kernel for too long to be worth
 * answering, so they are dropped before anything reads them (as CoreDNS's `shed` drops at the
 * socket). Node cannot ask the kernel how deep its queue is, nor how old its head; what it can see:
 *
 * - a turn of the event loop that reads a full batch off the socket left more queued behind it.
 *   Full batches turn after turn for `shedAfterMs` means the queue has not emptied for that long:
 *   we are behind, and the queries at its head are the oldest we have.
 * - the event loop itself stalling (a long GC, a burst of work) for `shedAfterMs`: whatever
 *   queued meanwhile is that old.
 *
 * Either turns shedding on: every datagram is dropped, which costs Node's read and nothing more,
 * until a turn reads less than a full batch, i.e. the queue is empty and what comes next is fresh.
 * Clients retry a dropped query; answering one seconds late only delays the fresh ones behind it.
 */
export class UdpBacklog {
  /** Datagrams dropped while shedding. */
  shed = 0;
  private shedding = false;
  private readInTurn = 0;
  private turnWatched = false;
  private fullSinceMs = -1;
  private lagTimer: NodeJS.Timeout | undefined;
  private expectedMs = 0;

  constructor(private readonly shedAfterMs: number) {}

  /** Samples the event loop's lag (a timer, unref'd) until stop(). */
  start(): void {
    if (this.lagTimer !== undefined) return;
    this.expectedMs = performance.now() + LAG_SAMPLE_MS;
    this.lagTimer = setInterval(() => {
      const nowMs = performance.now();
      if (nowMs - this.expectedMs >= this.shedAfterMs) this.shedding = true;
      this.expectedMs = nowMs + LAG_SAMPLE_MS;
    }, LAG_SAMPLE_MS);
    this.lagTimer.unref();
  }

  stop(): void {
    clearInterval(this.lagTimer);
    this.lagTimer = undefined;
  }

  /** Told of every datagram as it is read: true when it should be dropped unread. */
  arrived(): boolean {
    if (!this.turnWatched) {
      this.turnWatched = true;
      setImmediate(this.turnEnded);
    }
    this.readInTurn++;
    if (!this.shedding) return false;
    this.shed++;
    return true;
  }

  /** Whether datagrams are being dropped now. */
  isShedding(): boolean {
    return this.shedding;
  }

  // After the poll phase that read this turn's datagrams (setImmediate runs in the check phase).
  private readonly turnEnded = () => {
    const full = this.readInTurn >= LIBUV_UDP_BATCH;
    this.readInTurn = 0;
    this.turnWatched = false;
    if (!full) {
      this.shedding = false;
      this.fullSinceMs = -1;
      return;
    }
    const nowMs = performance.now();
    if (this.fullSinceMs < 0) this.fullSinceMs = nowMs;
    else if (nowMs - this.fullSinceMs >= this.shedAfterMs) this.shedding = true;
  };
}
