import { Buffer } from 'node:buffer';
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { ClusterDnsError, type HostPort } from '@cluster-dns/runtime';
import {
  type Cancellation,
  CLIENT_ADDRESS_OPTION,
  compareQuestion,
  type EdnsOption,
  type ExchangeOptions,
  encodeClientAddress,
  encodeOptRecord,
  exchangeRaw,
  FLAG,
  type Fqdn,
  HEADER_BYTES,
  questionEndOf,
  RCODE,
  RCODE_MASK,
  type RejectReason,
  randomQueryId,
  writeName,
} from '@cluster-dns/wire';
import { serverText } from '../../config/route-table.js';
import type { RouteUpstream } from '../../config/server-flag.js';
import type { ServerHealth } from './server-health.js';
import type { UpstreamStats } from './upstream-stats.js';

export class UpstreamsFailedError extends ClusterDnsError {
  constructor(
    readonly qname: string,
    readonly tried: readonly string[],
    cause?: unknown,
  ) {
    super('UPSTREAMS_FAILED', `no upstream answered for ${qname} (tried ${tried.join(', ') || 'none'})`, { cause });
  }
}

export interface UpstreamQuestion {
  readonly name: Fqdn;
  readonly qtype: number;
  readonly qclass: number;
  readonly dnssecOk: boolean;
  readonly checkingDisabled: boolean;
  /** The client asking, carried to the cluster's DNS (a node cache's routes to it): wire's CLIENT_ADDRESS_OPTION. */
  readonly clientAddress?: string;
  /** EDNS0 options a rewrite's edns0 rules set for the question. */
  readonly options?: readonly EdnsOption[];
}

export interface ForwardOptions {
  /** Sends one UDP query (wire's createUpstreamUdp: a socket of its own per query, kept ones on loopback). */
  exchangeUdp: (server: HostPort, query: Buffer, options: ExchangeOptions) => Promise<Buffer>;
  /** Sends one query over TCP for routes that force it (wire's createUpstreamTcp: kept connections); a new connection per query when unset. */
  exchangeTcp?: (server: HostPort, query: Buffer, options: ExchangeOptions) => Promise<Buffer>;
  timeoutMs: number;
  deadlineMs: number;
  stats: UpstreamStats;
  /** Servers found to loop back to us: skipped. */
  disabled: ReadonlySet<string>;
  /** --dns-0x20: ask in a random case, and check that the reply echoes it. */
  randomCase: boolean;
  now: () => number;
  /** The question's place in its route's share: cancelled when a newer question pushes it out. */
  cancel?: Cancellation;
  /** DNS over TLS for a route whose servers are `tls://` (tls-upstreams.ts). */
  exchangeTlsFor?: (upstream: RouteUpstream) => ForwardOptions['exchangeUdp'] | undefined;
  /** Which servers are down, for a route with `max_fails` (server-health.ts). */
  health?: ServerHealth;
}

/** How a route's servers are asked: TCP only, and a Corefile forward's options (TLS, health, failover). */
export interface RouteVia {
  readonly forceTcp?: boolean;
  readonly upstream?: RouteUpstream | undefined;
}

let casePool = randomBytes(0);
/** A random bit, from a pooled CSPRNG read (as query IDs are): one per letter of a 0x20 name. */
function randomBit(): number {
  if (casePool.length === 0) casePool = randomBytes(4096);
  const bit = (casePool[0] as number) & 1;
  casePool = casePool.subarray(1);
  return bit;
}

/**
 * Our query to an upstream: a fresh random ID, RD, the name (letters in a random case with
 * `randomCase`, draft-vixie-dnsext-dns0x20), EDNS0 with 1232 bytes.
 */
export function buildUpstreamQuery(q: UpstreamQuestion, randomCase = false): Buffer {
  const name = writeName(q.name);
  const opt = encodeOptRecord({
    udpSize: 1232,
    dnssecOk: q.dnssecOk,
    ...(q.clientAddress !== undefined
      ? { option: { code: CLIENT_ADDRESS_OPTION, data: encodeClientAddress(q.clientAddress) } }
      : {}),
    ...(q.options ? { options: q.options } : {}),
  });
  const out = Buffer.alloc(HEADER_BYTES + name.length + 4 + opt.length);
  out.writeUInt16BE(randomQueryId(), 0);
  out.writeUInt16BE(FLAG.RD | (q.checkingDisabled ? FLAG.CD : 0), 2);
  out.writeUInt16BE(1, 4);
  out.writeUInt16BE(1, 10);
  name.copy(out, HEADER_BYTES);
  if (randomCase) {
    for (let i = HEADER_BYTES; i < HEADER_BYTES + name.length; i++) {
      const c = out[i] as number;
      if (c >= 0x61 && c <= 0x7a && randomBit()) out[i] = c - 0x20;
    }
  }
  out.writeUInt16BE(q.qtype, HEADER_BYTES + name.length);
  out.writeUInt16BE(q.qclass, HEADER_BYTES + name.length + 2);
  opt.copy(out, HEADER_BYTES + name.length + 4);
  return out;
}

/**
 * One UDP try: in a random case with 0x20, and again at once in plain case from a server found
 * not to echo it.
 */
async function askUdp(
  server: HostPort,
  id: string,
  q: UpstreamQuestion,
  options: ForwardOptions,
  exchange: ExchangeOptions,
  deadline: number,
): Promise<Buffer> {
  const { stats } = options;
  const randomCase = options.randomCase && !stats.isCaseBlind(id, options.now());
  const query = buildUpstreamQuery(q, randomCase);
  const reply = await options.exchangeUdp(server, query, exchange);
  if (!randomCase || compareQuestion(reply, query, questionEndOf(query)) !== 'case') return reply;
  stats.rejected(id, 'case');
  stats.markCaseBlind(id, options.now());
  return options.exchangeUdp(server, buildUpstreamQuery(q), {
    ...exchange,
    timeoutMs: Math.max(1, Math.min(options.timeoutMs, deadline - performance.now())),
  });
}

/** One query on a TCP connection of its own (a truncated answer's retry; force_tcp without a pool). */
const oneShotTcp: ForwardOptions['exchangeUdp'] = (server, query, options) =>
  exchangeRaw(server, query, { ...options, transport: 'tcp' });

/**
 * Less time than this left before the deadline is no time for another server. It also absorbs
 * the clocks' difference: libuv runs timers on a millisecond clock read once per loop turn, so the
 * last try's timeout can fire up to a millisecond before the deadline by performance.now.
 */
const MIN_TRY_MS = 5;

/**
 * Asks the servers of a route in order until one answers with something other than SERVFAIL or
 * REFUSED: each try has its own random ID and source port, a truncated UDP reply is asked again
 * over TCP (or every try is, with `forceTcp`), and the whole thing ends by `deadlineMs`. If every server failed but one answered
 * SERVFAIL/REFUSED, that answer is returned; if none answered at all, UpstreamsFailedError.
 * With 0x20, a reply that does not echo our case is a server that does not preserve case (or a
 * forgery that guessed port and ID): the server is asked again at once in plain case, and from
 * then on for an hour (UpstreamStats.caseBlind).
 */
export async function forwardQuery(
  routeServers: readonly HostPort[],
  q: UpstreamQuestion,
  options: ForwardOptions,
  via: RouteVia | boolean = false,
): Promise<Buffer> {
  const { forceTcp: tcpOnly = false, upstream } = typeof via === 'boolean' ? { forceTcp: via } : via;
  const health = upstream && options.health;
  // max_fails: servers marked down are asked after those up; with failfast, not at all.
  const servers = health ? health.ordered(routeServers, serverText) : routeServers;
  if (health && upstream.failfast && health.allDown(routeServers, serverText))
    throw new UpstreamsFailedError(q.name, []);
  const overTls = upstream?.tls ? options.exchangeTlsFor?.(upstream) : undefined;
  const forceTcp = tcpOnly || overTls !== undefined;
  const timeoutMs = upstream?.readTimeoutMs ?? options.timeoutMs;
  const failover = upstream?.failover ?? [];
  const deadline = performance.now() + options.deadlineMs;
  const tried: string[] = [];
  let fallback: Buffer | undefined;
  let lastError: unknown;
  const { stats } = options;
  const viaTcp = overTls ?? options.exchangeTcp ?? oneShotTcp;
  const { cancel } = options;
  for (const server of servers) {
    // Pushed out of its share: no other server is tried, the asker is told why.
    if (cancel?.reason) throw cancel.reason;
    const id = serverText(server);
    if (options.disabled.has(id)) continue;
    const left = deadline - performance.now();
    if (left < MIN_TRY_MS) break;
    tried.push(id);
    const counts = stats.server(id);
    counts.queries++;
    const onRejected = (reason: RejectReason) => stats.rejected(id, reason);
    const started = performance.now();
    try {
      const first = { timeoutMs: Math.min(timeoutMs, left), onRejected, ...(cancel ? { cancel } : {}) };
      // No 0x20 over TCP: a connection's sequence numbers already defeat blind spoofing.
      let reply = forceTcp
        ? await viaTcp(server, buildUpstreamQuery(q), first)
        : await askUdp(server, id, q, options, first, deadline);
      // A truncated UDP answer is asked again on a connection of its own (RFC 7766 §6.2.1: rare).
      if (!forceTcp && (reply.readUInt16BE(2) & FLAG.TC) !== 0) {
        reply = await oneShotTcp(server, buildUpstreamQuery(q), {
          timeoutMs: Math.max(1, Math.min(options.timeoutMs, deadline - performance.now())),
          onRejected,
          ...(cancel ? { cancel } : {}),
        });
      }
      const rcode = reply.readUInt16BE(2) & RCODE_MASK;
      stats.tried(id, rcode, (performance.now() - started) / 1000);
      // It answered: alive, whatever it said.
      health?.succeeded(id);
      if (rcode === RCODE.SERVFAIL || rcode === RCODE.REFUSED || failover.includes(rcode)) {
        counts.failures++;
        fallback = reply;
        continue;
      }
      return reply;
    } catch (error) {
      // Given up by us, not failed by the server: not counted against it.
      if (cancel?.reason) throw cancel.reason;
      counts.failures++;
      lastError = error;
      stats.tried(id, undefined, (performance.now() - started) / 1000);
      if (health && upstream) health.failed(id, server, upstream);
    }
  }
  if (fallback) return fallback;
  throw new UpstreamsFailedError(q.name, tried, lastError);
}
