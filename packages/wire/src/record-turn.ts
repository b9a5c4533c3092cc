import { Buffer } from 'node:buffer';
import { QTYPE } from './constants.js';
import type { ScannedResponse } from './response-scan.js';

/** A run of answer records that may be served in a turning order: all A, or all AAAA, all one size. */
export interface TurnRun {
  /** Offset of the first record. */
  readonly start: number;
  /** Octets of each record. */
  readonly size: number;
  readonly count: number;
}

/**
 * The longest run of consecutive A (or AAAA) answer records of one size in a reply, or undefined
 * when none holds two. One size keeps every TTL where the template has it when the run turns (the
 * owner names are compression pointers, as a normalised reply writes them).
 */
export function findTurnRun(scanned: ScannedResponse): TurnRun | undefined {
  let best: TurnRun | undefined;
  let run: TurnRun | undefined;
  let type = -1;
  for (const r of scanned.records) {
    if (r.section !== 'answer') break;
    const size = r.end - r.start;
    const turnable = r.type === QTYPE.A || r.type === QTYPE.AAAA;
    if (turnable && run && r.type === type && size === run.size && r.start === run.start + run.count * run.size)
      run = { ...run, count: run.count + 1 };
    else run = turnable ? { start: r.start, size, count: 1 } : undefined;
    type = r.type;
    if (run && run.count >= 2 && (!best || run.count > best.count)) best = run;
  }
  return best;
}

/**
 * Turns a run of records `by` places in place (CoreDNS's loadbalance: each answer starts from
 * another record), or leaves the reply as it is when the run is not whole in it (truncated).
 */
export function turnRecords(reply: Buffer, run: TurnRun, by: number): Buffer {
  const shift = by % run.count;
  const end = run.start + run.size * run.count;
  if (shift === 0 || end > reply.length) return reply;
  const head = Buffer.from(reply.subarray(run.start, run.start + shift * run.size));
  reply.copy(reply, run.start, run.start + shift * run.size, end);
  head.copy(reply, end - head.length);
  return reply;
}
