import { ClusterDnsError, type HostPort } from '@cluster-dns/runtime';
import {
  type ExchangeOptions,
  encodeOptRecord,
  exchangeRaw,
  FLAG,
  type Fqdn,
  HEADER_BYTES,
  RCODE,
  RCODE_MASK,
  type RejectReason,
  randomQueryId,
  writeName,
} from '@cluster-dns/wire';
import { serverText } from './route-table.js';

export class UpstreamsFailedError extends ClusterDnsError {
  constructor(
    readonly qname: string,
    readonly tried: readonly string[],
    cause?: unknown,
  ) {
    super('UPSTREAMS_FAILED', `no upstream answered for ${qname} (tried ${tried.join(', ') || 'none'})`, { cause });
  }
}

export interface ServerCounters {
  queries: number;
  failures: number;
}

export interface UpstreamQuestion {
  readonly name: Fqdn;
  readonly qtype: number;
  readonly qclass: number;
  readonly dnssecOk: boolean;
  readonly checkingDisabled: boolean;
}

export interface ForwardOptions {
  /** Sends one UDP query (the forwarder's socket pool). */
  exchangeUdp: (server: HostPort, query: Buffer, options: ExchangeOptions) => Promise<Buffer>;
  timeoutMs: number;
  deadlineMs: number;
  counters: Map<string, ServerCounters>;
  /** Servers found to loop back to us: skipped. */
  disabled: ReadonlySet<string>;
  onRejected: (server: string, reason: RejectReason) => void;
  /** Each try: the server, its rcode (undefined: no answer, a timeout or an error) and how long it took. */
  onTry?: (server: string, rcode: number | undefined, seconds: number) => void;
}

/** Our query to an upstream: a fresh random ID, RD, the canonical name, EDNS0 with 1232 bytes. */
export function buildUpstreamQuery(q: UpstreamQuestion): Buffer {
  const name = writeName(q.name);
  const opt = encodeOptRecord({ udpSize: 1232, dnssecOk: q.dnssecOk });
  const out = Buffer.alloc(HEADER_BYTES + name.length + 4 + opt.length);
  out.writeUInt16BE(randomQueryId(), 0);
  out.writeUInt16BE(FLAG.RD | (q.checkingDisabled ? FLAG.CD : 0), 2);
  out.writeUInt16BE(1, 4);
  out.writeUInt16BE(1, 10);
  name.copy(out, HEADER_BYTES);
  out.writeUInt16BE(q.qtype, HEADER_BYTES + name.length);
  out.writeUInt16BE(q.qclass, HEADER_BYTES + name.length + 2);
  opt.copy(out, HEADER_BYTES + name.length + 4);
  return out;
}

/**
 * Asks the servers of a route in order until one answers with something other than SERVFAIL or
 * REFUSED: each try has its own random ID and source port, a truncated UDP reply is asked again
 * over TCP, and the whole thing ends by `deadlineMs`. If every server failed but one answered
 * SERVFAIL/REFUSED, that answer is returned; if none answered at all, UpstreamsFailedError.
 */
export async function forwardQuery(
  servers: readonly HostPort[],
  q: UpstreamQuestion,
  options: ForwardOptions,
): Promise<Buffer> {
  const deadline = Date.now() + options.deadlineMs;
  const tried: string[] = [];
  let fallback: Buffer | undefined;
  let lastError: unknown;
  for (const server of servers) {
    const id = serverText(server);
    if (options.disabled.has(id)) continue;
    const left = deadline - Date.now();
    if (left <= 0) break;
    tried.push(id);
    const counters = options.counters.get(id) ?? { queries: 0, failures: 0 };
    options.counters.set(id, counters);
    counters.queries++;
    const timeoutMs = Math.min(options.timeoutMs, left);
    const onRejected = (reason: RejectReason) => options.onRejected(id, reason);
    const started = performance.now();
    try {
      let reply = await options.exchangeUdp(server, buildUpstreamQuery(q), { timeoutMs, onRejected });
      if ((reply.readUInt16BE(2) & FLAG.TC) !== 0) {
        reply = await exchangeRaw(server, buildUpstreamQuery(q), {
          transport: 'tcp',
          timeoutMs: Math.max(1, Math.min(options.timeoutMs, deadline - Date.now())),
          onRejected,
        });
      }
      const rcode = reply.readUInt16BE(2) & RCODE_MASK;
      options.onTry?.(id, rcode, (performance.now() - started) / 1000);
      if (rcode === RCODE.SERVFAIL || rcode === RCODE.REFUSED) {
        counters.failures++;
        fallback = reply;
        continue;
      }
      return reply;
    } catch (error) {
      counters.failures++;
      lastError = error;
      options.onTry?.(id, undefined, (performance.now() - started) / 1000);
    }
  }
  if (fallback) return fallback;
  throw new UpstreamsFailedError(q.name, tried, lastError);
}
