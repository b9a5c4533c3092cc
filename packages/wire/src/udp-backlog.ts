import { performance } from 'node:perf_hooks';
import { QUEUED_DATAGRAM_BYTES } from './udp-queue.js';

/**
 * How many datagrams libuv reads from a UDP socket in one go before it lets the event loop turn
 * (uv__udp_recvmsg: up to 32, plus the read that finds the queue empty). A turn that reads this
 * many left more waiting in the kernel.
 */
export const LIBUV_UDP_BATCH = 32;

/** How often the queue is measured while behind, at most: a read of /proc/net/udp each time. */
const PROBE_MS = 25;

/**
 * Tells when a UDP socket's queries have waited in the kernel too long to be worth answering, so
 * they are dropped before anything reads them (as CoreDNS's `shed` drops at the socket), and the
 * fresh ones behind them get the time instead. Clients retry a dropped query; answering one
 * seconds late only delays the queries behind it, which then arrive late too.
 *
 * What it sees: a turn of the event loop that reads a full batch off the socket left more queued
 * behind it. While turns keep reading full batches, it measures, every PROBE_MS, how long the
 * queue now waiting would take to drain at the rate it is being read: the queue's octets
 * (/proc/net/udp, `queuedBytes`) over the kernel's truesize of a query, over the datagrams read
 * per millisecond since the backlog began. When that wait reaches `shedAfterMs`, every datagram is
 * dropped, which costs Node's read and nothing more, until a turn reads less than a full batch:
 * the queue is empty, and what comes next is fresh. A standing queue that drains quickly (a
 * closed-loop client at full speed, the backlog a GC pause leaves) is answered. Without the
 * queue's length (not Linux), a backlog that lasts `shedAfterMs` counts as one that long.
 */
export class UdpBacklog {
  /** Datagrams dropped while shedding. */
  shed = 0;
  private shedding = false;
  private readInTurn = 0;
  private turnWatched = false;
  /** When the current run of full turns began, -1 outside one; datagrams read since; last probe. */
  private behindSinceMs = -1;
  private readBehind = 0;
  private probedMs = 0;

  constructor(
    private readonly shedAfterMs: number,
    private readonly queuedBytes?: () => number,
  ) {}

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

  /** How long, in ms, the queue waiting now would take to drain at the rate it is read; -1 unknown. */
  private queueWaitMs(nowMs: number): number {
    const bytes = this.queuedBytes?.() ?? -1;
    if (bytes < 0) return -1;
    const perMs = this.readBehind / Math.max(1, nowMs - this.behindSinceMs);
    return bytes / QUEUED_DATAGRAM_BYTES / Math.max(perMs, 1e-3);
  }

  // After the poll phase that read this turn's datagrams (setImmediate runs in the check phase).
  private readonly turnEnded = () => {
    const read = this.readInTurn;
    this.readInTurn = 0;
    this.turnWatched = false;
    if (read < LIBUV_UDP_BATCH) {
      this.shedding = false;
      this.behindSinceMs = -1;
      return;
    }
    const nowMs = performance.now();
    if (this.behindSinceMs < 0) {
      this.behindSinceMs = nowMs;
      this.readBehind = 0;
      this.probedMs = nowMs;
      return;
    }
    this.readBehind += read;
    if (this.shedding || nowMs - this.probedMs < Math.min(PROBE_MS, this.shedAfterMs)) return;
    this.probedMs = nowMs;
    const waitMs = this.queueWaitMs(nowMs);
    const behindMs = nowMs - this.behindSinceMs;
    if (waitMs >= this.shedAfterMs || (waitMs < 0 && behindMs >= this.shedAfterMs)) this.shedding = true;
  };
}
