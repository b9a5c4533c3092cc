import {
  buildBareResponse,
  type DnsRequest,
  FLAG,
  type Fqdn,
  finishFromTemplate,
  ixfrQuerySerial,
  MessageWriter,
  type ParsedQuery,
  QTYPE,
  RCODE,
  type Reply,
} from '@cluster-dns/wire';
import { type AnswerParts, buildAnswer, type ZoneView, zoneOf } from './answer-builder.js';
import { AnswerCache } from './answer-cache.js';
import { incrementalTransfer, zoneTransfer } from './zone-transfer.js';

export interface ResponderOptions {
  view: ZoneView;
  /** False until the informers have synced: cluster names then get SERVFAIL, not NXDOMAIN. */
  isReady: () => boolean;
  /** Zone transfers (AXFR, IXFR) are allowed from these client addresses only. */
  transferAllowed: (address: string) => boolean;
  /** Bytes of ready answers kept at most. */
  answerCacheBytes?: number;
  /** Told of each zone transfer served. */
  onTransfer?: (type: 'axfr' | 'ixfr', result: 'incremental' | 'full' | 'current') => void;
}

export interface Responder {
  /** The query pipeline's handler: a query that passed the checks every server makes. */
  handle(request: DnsRequest): Reply;
  /** Drops the ready answers built from these Services, and every volatile one. */
  invalidate(owners: readonly string[]): void;
  readonly cache: AnswerCache;
}

/** An answer's wire form: ID 0, the canonical question, no OPT, as finishFromTemplate wants it. */
export function encodeTemplate(q: ParsedQuery, parts: AnswerParts): Buffer {
  const writer = new MessageWriter(256).question(q.key, q.qtype, q.qclass);
  for (const rr of parts.answers) writer.record(1, rr);
  for (const rr of parts.authorities) writer.record(2, rr);
  for (const rr of parts.additionals) writer.record(3, rr);
  return writer.finish(0, FLAG.QR | FLAG.AA | parts.rcode);
}

/**
 * Answers queries from ready answers per (name, type, class), built on first use from the compact
 * store and dropped when a Service they came from changes: a query costs a parse of the question,
 * a lookup and a patch; a miss, a build of that one name's records.
 */
export function createResponder(options: ResponderOptions): Responder {
  const { view } = options;
  const cache = new AnswerCache(options.answerCacheBytes ?? 32 << 20);

  const templateFor = (q: ParsedQuery, zone: Fqdn): Buffer => {
    const key = `${q.key}|${q.qtype}|${q.qclass}`;
    const hit = cache.get(key);
    if (hit) return hit;
    const parts = buildAnswer(view, zone, q.key, q.qtype);
    const template = encodeTemplate(q, parts);
    cache.set(key, template, parts.owners, parts.stable);
    return template;
  };

  return {
    cache,
    handle(request) {
      const { query: q, context } = request;
      const bare = (rcode: number, authoritative = false) =>
        buildBareResponse(q, rcode, { authoritative, udpPayloadBytes: request.udpPayloadBytes });
      const zone = zoneOf(view, q.key);
      // Not a recursor: names outside our zones are refused, without AA.
      if (!zone) return bare(RCODE.REFUSED);
      if (!options.isReady()) return bare(RCODE.SERVFAIL);
      // Kubernetes names are DNS-1123: a label with an escaped octet cannot exist.
      if (q.key.includes('\\')) return bare(RCODE.NXDOMAIN, true);
      if (q.qtype === QTYPE.AXFR || q.qtype === QTYPE.IXFR) {
        if (!options.transferAllowed(context.remoteAddress)) return bare(RCODE.REFUSED);
        if (q.qtype === QTYPE.AXFR) {
          if (context.transport !== 'tcp') return bare(RCODE.REFUSED);
          options.onTransfer?.('axfr', 'full');
          return zoneTransfer(view, zone, q);
        }
        const serial = ixfrQuerySerial(q.raw);
        if (serial === undefined) return bare(RCODE.FORMERR, true);
        // Over UDP, the current SOA alone (RFC 1995 §2): the client compares serials, then uses TCP.
        const transfer = incrementalTransfer(view, zone, q, context.transport === 'tcp' ? serial : view.state.serial);
        options.onTransfer?.('ixfr', transfer.result);
        return transfer.messages;
      }
      return finishFromTemplate(templateFor(q, zone), q, request.limitBytes, {
        udpPayloadBytes: request.udpPayloadBytes,
      });
    },
    invalidate: (owners) => cache.invalidate(owners),
  };
}
