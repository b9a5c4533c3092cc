import type { Buffer } from 'node:buffer';
import {
  type ExpressLane,
  HEADER_BYTES,
  latin1Of,
  PlainQuestion,
  patchTemplate,
  plainOpt,
  QCLASS,
  readPlainQuery,
  udpLimitBytes,
} from '@cluster-dns/wire';
import type { AnswerCache, ZoneSystem } from './answer-cache.js';

export interface AnswerLaneDeps {
  cache: AnswerCache;
  /** False until the first lists are in: the zone stage answers SERVFAIL then. */
  isReady(): boolean;
  /** The UDP payload size our OPT advertises (--edns-packet-max), as the pipeline's. */
  udpPayloadBytes: number;
  /** Counts an answered query as the pipeline's observe hook would (metrics.ts). */
  count(qtype: number, system: ZoneSystem, reply: Buffer): void;
}

/**
 * The record-builder's express lane (wire's ExpressLane), as the forwarder's cache hits have one:
 * a plain UDP query of class IN whose answer is ready in the answer cache, asked in the case the
 * cache keeps (canonical), is answered here, before the query pipeline and the chain, with the
 * bytes the answer stage makes from the same template (finishFromTemplate's patch), and counted
 * in the same series. Anything else takes the whole way: the zone stage (REFUSED outside our
 * zones, SERVFAIL before ready, NXDOMAIN for escaped names), transfers, and answers built on a miss.
 */
export function createAnswerLane(deps: AnswerLaneDeps): ExpressLane {
  const { cache, udpPayloadBytes } = deps;
  const question = new PlainQuestion();
  return (raw) => {
    if (!readPlainQuery(raw, question) || question.qclass !== QCLASS.IN || !deps.isReady()) return undefined;
    const entry = cache.findByOctets(latin1Of(raw, HEADER_BYTES, question.questionEnd));
    if (entry === undefined) return undefined;
    const reply = patchTemplate(
      entry.wire,
      raw,
      question.questionEnd,
      udpLimitBytes(question.ednsUdpSize, udpPayloadBytes),
      question.ednsUdpSize === 0 ? undefined : plainOpt(udpPayloadBytes, question.dnssecOk),
      undefined,
      0,
      // Found by the very octets of its question: the name is spelt as asked already.
      false,
    );
    deps.count(question.qtype, entry.system, reply);
    return reply;
  };
}
