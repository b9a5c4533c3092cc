import { performance } from 'node:perf_hooks';

/**
 * How many datagrams libuv reads from a UDP socket in one go before it lets the event loop turn
 * (uv__udp_recvmsg: up to 32, plus the read that finds the queue empty). A turn that reads this
 * many left more waiting in the kernel.
 */
export const LIBUV_UDP_BATCH = 32;

/**
 * Tells when a UDP socket's queries have been waiting in the kernel for too long to be worth
 * answering, so they are dropped before anything reads them (as CoreDNS's `shed` drops at the
 * socket). Node cannot ask the kernel how deep its queue is, nor how old its head; what it can see
 * is that a turn of the event loop that reads a full batch off the socket left more queued behind
 * it. Full batches turn after turn for `shedAfterMs` means the queue has not emptied for that
 * long: we are behind (sustained overload, or a backlog too deep to drain in time), and the
 * queries at its head are the oldest we have. Then every datagram is dropped, which costs Node's
 * read and nothing more, until a turn reads less than a full batch: the queue is empty, and what
 * comes next is fresh. Clients retry a dropped query; answering one seconds late only delays the
 * fresh ones behind it. A backlog that drains within the bound (what a GC pause leaves) is answered.
 */
export class UdpBacklog {
  /** Datagrams dropped while shedding. */
  shed = 0;
  private shedding = false;
  private readInTurn = 0;
  private turnWatched = false;
  private fullSinceMs = -1;

  constructor(private readonly shedAfterMs: number) {}

  /** Told of every datagram as it is read: true when it should be dropped unread. */
  arrived(): boolean {
    this.watchTurn();
    this.readInTurn++;
    if (!this.shedding) return false;
    this.shed++;
    return true;
  }

  /** Whether datagrams are being dropped now. */
  isShedding(): boolean {
    return this.shedding;
  }

  private watchTurn(): void {
    if (this.turnWatched) return;
    this.turnWatched = true;
    setImmediate(this.turnEnded);
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
