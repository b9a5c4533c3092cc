import { Buffer } from 'node:buffer';
import { performance } from 'node:perf_hooks';
import { EDNS_DEFAULT_UDP_BYTES, FLAG, HEADER_BYTES, OPCODE, QCLASS, QTYPE, RCODE } from './constants.js';
import type { QueryContext, RawHandler, Reply } from './dns-handler.js';
import { QueryFormatError } from './errors.js';
import { u16 } from './octets.js';
import { opcodeOf, type ParsedQuery, parseQuery } from './query.js';
import { buildBareResponse, buildHeaderOnlyResponse, maxResponseBytes } from './response.js';

/** One query that passed the checks every DNS server makes, with what its reply may be. */
export interface DnsRequest {
  readonly query: ParsedQuery;
  readonly context: QueryContext;
  /** The largest reply this client takes (EDNS size capped by ours, 512 without EDNS, 64 KiB on TCP). */
  readonly limitBytes: number;
  /** The UDP payload size our OPT records advertise. */
  readonly udpPayloadBytes: number;
}

export type QueryHandler = (request: DnsRequest) => Reply | Promise<Reply>;

/** Why the pipeline answered (or dropped) a message itself, before any handler saw it. */
export type Rejection =
  | 'short' // under 12 octets: dropped
  | 'response' // QR=1: dropped, so two servers never bounce replies at each other
  | 'opcode' // NOTIMP
  | 'malformed' // FORMERR
  | 'meta-type' // OPT, TSIG or TKEY as the question: FORMERR
  | 'edns-version' // BADVERS
  | 'class' // REFUSED
  | 'handler-error'; // SERVFAIL: the handler threw

export interface QueryOutcome {
  /** Undefined when the question could not be read. */
  readonly query: ParsedQuery | undefined;
  /**
   * The request the handler saw (undefined when the pipeline answered or dropped the message
   * itself), with whatever its stages noted on it: the zone it fell in, say.
   */
  readonly request: DnsRequest | undefined;
  readonly context: QueryContext;
  /** The first message sent back, or undefined when the message was dropped. */
  readonly reply: Buffer | undefined;
  readonly rejected: Rejection | undefined;
  /**
   * How long a reply that was not at hand took: from the handler's promise to its settling (an
   * upstream's answer, a NOTIFY's transfer). 0 for a reply made at once (a cache hit, a refusal):
   * that takes microseconds of one turn of the event loop, and reading a clock twice for it would
   * cost more than the rest of a hit's bookkeeping.
   */
  readonly seconds: number;
}

export interface PipelineOptions {
  handle: QueryHandler;
  /** RA in the replies the pipeline makes itself: set by a recursive forwarder, not an authority. */
  recursionAvailable: boolean;
  /** Opcodes the handler takes (default QUERY); any other gets NOTIMP (RFC 8906 §3.1.4). */
  opcodes?: readonly number[];
  /** Classes the handler takes (default IN and ANY); any other gets REFUSED. */
  classes?: readonly number[];
  /** Our UDP payload cap, advertised in every OPT (default 1232). */
  udpPayloadBytes?: number;
  /** Told of every message, answered or not: the one place queries are counted. */
  observe?: (outcome: QueryOutcome) => void;
  /** Where rejections and handler failures are logged, once per reason. */
  log?: { warn(msg: string, fields?: Record<string, unknown>): void };
}

const isMetaType = (qtype: number) => qtype === QTYPE.OPT || qtype === QTYPE.TSIG || qtype === QTYPE.TKEY;
const MAX_LOGGED_REASONS = 100;

/**
 * The preamble every DNS server of this project runs, in RFC 8906 order, as miekg/dns's accept
 * function does: read the header; drop short messages and responses; NOTIMP for opcodes the
 * handler does not take (checked before the question, so a header-only message still gets it);
 * FORMERR for an unreadable question or a meta-type asked; BADVERS for EDNS versions above 0;
 * REFUSED for other classes; then the handler. A handler that throws gets SERVFAIL. Every message
 * is observed once, and each kind of problem logged once.
 */
export function createQueryPipeline(options: PipelineOptions): RawHandler {
  // Tables, not Sets: every query is checked against both, and an indexed octet costs less than a hash.
  const opcodes = tableOf(options.opcodes ?? [OPCODE.QUERY], 16);
  const classes = tableOf(options.classes ?? [QCLASS.IN, QCLASS.ANY], 65536);
  const udpPayloadBytes = options.udpPayloadBytes ?? EDNS_DEFAULT_UDP_BYTES;
  const ra = options.recursionAvailable;
  const logged = new Set<string>();
  const { observe } = options;

  const logOnce = (reason: string, fields: Record<string, unknown>) => {
    if (!options.log || logged.has(reason) || logged.size >= MAX_LOGGED_REASONS) return;
    logged.add(reason);
    options.log.warn('query rejected', { reason, ...fields });
  };
  const finish = (
    reply: Reply,
    query: ParsedQuery | undefined,
    context: QueryContext,
    startedMs: number,
    rejected?: Rejection,
    request?: DnsRequest,
  ): Reply => {
    if (observe) {
      // A lazy reply (a zone transfer) is not made yet: observed without its first message.
      const first = Buffer.isBuffer(reply) ? reply : Array.isArray(reply) ? (reply[0] as Buffer) : undefined;
      const seconds = startedMs > 0 ? (performance.now() - startedMs) / 1000 : 0;
      observe({ query, request, context, reply: first, rejected, seconds });
    }
    return reply;
  };
  const bare = (q: ParsedQuery, rcode: number) =>
    buildBareResponse(q, rcode, { recursionAvailable: ra, udpPayloadBytes });
  const failed = (error: unknown, request: DnsRequest, startedMs: number) => {
    logOnce(`handler failed: ${(error as Error)?.message ?? String(error)}`, { err: error, answered: 'SERVFAIL' });
    const { query, context } = request;
    return finish(bare(query, RCODE.SERVFAIL), query, context, startedMs, 'handler-error', request);
  };

  return (raw, context) => {
    if (raw.length < HEADER_BYTES) {
      logOnce('shorter than a DNS header', { from: context.remoteAddress, answered: 'dropped' });
      return finish(undefined, undefined, context, 0, 'short');
    }
    if (u16(raw, 2) & FLAG.QR) return finish(undefined, undefined, context, 0, 'response');
    let query: ParsedQuery | undefined;
    let formatError: QueryFormatError | undefined;
    try {
      query = parseQuery(raw);
    } catch (error) {
      if (!(error instanceof QueryFormatError)) throw error;
      formatError = error;
    }
    if (opcodes[opcodeOf(raw)] !== 1) {
      logOnce(`opcode ${opcodeOf(raw)}`, { answered: 'NOTIMP' });
      const reply = query ? bare(query, RCODE.NOTIMP) : buildHeaderOnlyResponse(raw, RCODE.NOTIMP);
      return finish(reply, query, context, 0, 'opcode');
    }
    if (!query) {
      const reason = (formatError as QueryFormatError).message;
      logOnce(reason, { from: context.remoteAddress, answered: 'FORMERR' });
      return finish(buildHeaderOnlyResponse(raw, RCODE.FORMERR), undefined, context, 0, 'malformed');
    }
    if (isMetaType(query.qtype)) {
      logOnce(`qtype ${query.qtype} asked`, { answered: 'FORMERR' });
      return finish(bare(query, RCODE.FORMERR), query, context, 0, 'meta-type');
    }
    if (query.edns && query.edns.version > 0) {
      return finish(bare(query, RCODE.BADVERS), query, context, 0, 'edns-version');
    }
    if (classes[query.qclass] !== 1) return finish(bare(query, RCODE.REFUSED), query, context, 0, 'class');
    const request: DnsRequest = {
      query,
      context,
      limitBytes: maxResponseBytes(query, context.transport, udpPayloadBytes),
      udpPayloadBytes,
    };
    let reply: Reply | Promise<Reply>;
    try {
      reply = options.handle(request);
    } catch (error) {
      return failed(error, request, 0);
    }
    if (!(reply instanceof Promise)) return finish(reply, query, context, 0, undefined, request);
    const startedMs = observe ? performance.now() : 0;
    return reply.then(
      (r) => finish(r, query, context, startedMs, undefined, request),
      (error: unknown) => failed(error, request, startedMs),
    );
  };
}

/** 1 at each of `values`, 0 elsewhere. */
function tableOf(values: readonly number[], size: number): Uint8Array {
  const table = new Uint8Array(size);
  for (const value of values) table[value] = 1;
  return table;
}
