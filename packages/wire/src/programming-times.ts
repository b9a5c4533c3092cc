import { Buffer } from 'node:buffer';

/**
 * The DNS programming latency SLI (kubernetes/community sig-scalability
 * `dns_programming_latency.md`) is measured at every DNS instance, from the EndpointSlice's
 * `endpoints.kubernetes.io/last-change-trigger-time` to the instance answering with the change. A
 * forwarder or node cache learns of a change by IXFR, not from the API, so the record-builder
 * hands the trigger times on with the change: an EDNS option of our own on our zone transfers,
 * asked for by an empty one in the IXFR query (as NSID is, RFC 5001), so a secondary that does
 * not ask never sees it.
 *
 * The code is from the range kept for local and experimental use (RFC 6891 §9: 65001-65534).
 */
export const PROGRAMMING_TIMES_OPTION = 65053;

/** CoreDNS's `service_kind` label values for the changes it times (coredns/coredns#7951). */
export type ProgrammedKind = 'cluster_ip' | 'headless_with_selector';

/** One EndpointSlice change with a trigger time: what it belonged to, and when it was triggered. */
export interface ProgrammedChange {
  readonly kind: ProgrammedKind;
  /** The trigger time, in ms since the epoch (the API server's clock, as CoreDNS takes it). */
  readonly triggerMs: number;
}

/**
 * At most this many changes ride on one transfer (7 octets each): a node cache catching up on a
 * burst gets the oldest, which bound the latency, and the transfer stays far below 64 KiB.
 */
export const MAX_PROGRAMMED_PER_TRANSFER = 1000;

const KIND_CODE: Record<ProgrammedKind, number> = { cluster_ip: 1, headless_with_selector: 2 };
const KIND_OF: Record<number, ProgrammedKind> = { 1: 'cluster_ip', 2: 'headless_with_selector' };
const ENTRY_BYTES = 7;

/** The option's data: per change, its kind (1 octet) and trigger time in ms (48 bits). */
export function encodeProgrammingTimes(changes: readonly ProgrammedChange[]): Buffer {
  const kept = changes.slice(0, MAX_PROGRAMMED_PER_TRANSFER);
  const out = Buffer.alloc(kept.length * ENTRY_BYTES);
  kept.forEach((change, i) => {
    out[i * ENTRY_BYTES] = KIND_CODE[change.kind];
    out.writeUIntBE(Math.max(0, Math.min(change.triggerMs, 2 ** 48 - 1)), i * ENTRY_BYTES + 1, 6);
  });
  return out;
}

/** The changes in the option's data; an entry of a kind not known here is skipped, a partial one ignored. */
export function decodeProgrammingTimes(data: Buffer): ProgrammedChange[] {
  const out: ProgrammedChange[] = [];
  for (let at = 0; at + ENTRY_BYTES <= data.length; at += ENTRY_BYTES) {
    const kind = KIND_OF[data[at] as number];
    if (kind) out.push({ kind, triggerMs: data.readUIntBE(at + 1, 6) });
  }
  return out;
}
