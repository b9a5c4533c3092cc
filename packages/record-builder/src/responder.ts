import type { Buffer } from 'node:buffer';
import {
  chainStages,
  FLAG,
  type Fqdn,
  finishFromTemplate,
  isInZone,
  MessageWriter,
  type ParsedQuery,
  type Reply,
} from '@cluster-dns/wire';
import { type AnswerParts, buildAnswer, type ZoneView } from './answer-builder.js';
import { AnswerCache } from './answer-cache.js';
import { clientMapZone } from './cluster-state.js';
import { TransferStage } from './transfer-stage.js';
import { type ZoneRequest, ZoneStage } from './zone-stage.js';

export interface ResponderOptions {
  view: ZoneView;
  /** False until the informers have synced: cluster names then get SERVFAIL, not NXDOMAIN. */
  isReady: () => boolean;
  /** Zone transfers (AXFR, IXFR) are allowed from these client addresses only. */
  transferAllowed: (address: string) => boolean;
  /** Bytes of ready answers kept at most. */
  answerCacheBytes?: number;
  /** Told of each zone transfer served. */
  onTransfer?: (type: 'axfr' | 'ixfr', result: 'incremental' | 'full' | 'current', foreign?: boolean) => void;
}

export interface Responder {
  /** The query pipeline's handler: a query that passed the checks every server makes. */
  handle(request: ZoneRequest): Reply | Promise<Reply>;
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
 * a lookup and a patch; a miss, a build of that one name's records. The chain: which zone (or
 * REFUSED), a zone transfer, else the answer.
 */
export function createResponder(options: ResponderOptions): Responder {
  const { view } = options;
  const cache = new AnswerCache(options.answerCacheBytes ?? 32 << 20);

  const clientMap = clientMapZone(view.zone);
  const templateFor = (q: ParsedQuery, zone: Fqdn): Buffer => {
    const hit = cache.get(q);
    if (hit) return hit;
    const parts = buildAnswer(view, zone, q.key, q.qtype);
    const template = encodeTemplate(q, parts);
    // Never ready for the answer lane, which does not know who asks: the client map is answered
    // through the zone stage, to this host only.
    if (!isInZone(q.key, clientMap))
      cache.set(q, template, parts.owners, parts.stable, view.reverseZones.includes(zone) ? 'reverse' : 'auth');
    return template;
  };
  const answer = (request: ZoneRequest): Reply =>
    finishFromTemplate(templateFor(request.query, request.zone as Fqdn), request.query, request.limitBytes, {
      udpPayloadBytes: request.udpPayloadBytes,
    });

  return {
    cache,
    handle: chainStages<ZoneRequest>(
      [new ZoneStage(view, options.isReady), new TransferStage(view, options.transferAllowed, options.onTransfer)],
      answer,
    ),
    invalidate: (owners) => cache.invalidate(owners),
  };
}
