import type { Buffer } from 'node:buffer';
import {
  answerPlainQuery,
  type ExpressLane,
  PlainQuestion,
  QCLASS,
  questionOctetsOf,
  readPlainQuery,
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
 * bytes the answer stage makes from the same template (wire's answerPlainQuery), and counted
 * in the same series. Anything else takes the whole way: the zone stage (REFUSED outside our
 * zones, SERVFAIL before ready, NXDOMAIN for escaped names), transfers, and answers built on a miss.
 */
export function createAnswerLane(deps: AnswerLaneDeps): ExpressLane {
  const { cache, udpPayloadBytes } = deps;
  const question = new PlainQuestion();
  return (raw) => {
    if (!readPlainQuery(raw, question) || question.qclass !== QCLASS.IN || !deps.isReady()) return undefined;
    const entry = cache.findByOctets(questionOctetsOf(raw, question.questionEnd));
    if (entry === undefined) return undefined;
    const reply = answerPlainQuery(entry.wire, raw, question, udpPayloadBytes);
    deps.count(question.qtype, entry.system, reply);
    return reply;
  };
}
