import { Buffer } from 'node:buffer';
import {
  buildBareResponse,
  closestBlock,
  finishFromTemplate,
  type Next,
  RCODE,
  RCODE_MASK,
  type Reply,
  type Stage,
  scanResponse,
} from '@cluster-dns/wire';
import { type ForwarderRequest, queryAs, RESOLVED } from '../../config/forwarder-request.js';
import { mapReply, rewriteQuestion, type ScopedRewrites } from './name-rewrite.js';

/**
 * A Corefile's `rewrite` (coredns/coredns plugin/rewrite): a question whose name (or type) a rule
 * matches goes on as rewritten, and its answer comes back to the question asked: the question
 * restored, owner names and targets mapped back as the rule says (`answer auto`, always for exact;
 * `answer name`, `answer value`). After the cache, as in CoreDNS's order: the answer is cached
 * under the question asked, and indexed under the rewritten name too, so a pushed change of that
 * name drops it.
 */
export class RewriteStage implements Stage<ForwarderRequest> {
  readonly name = 'rewrite';
  readonly counts = { rewritten: 0, invalid: 0 };

  constructor(private readonly blocks: () => readonly ScopedRewrites[]) {}

  serve(request: ForwarderRequest, next: Next<ForwarderRequest>): Reply | Promise<Reply> {
    const q = request.query;
    // The rules of the block that serves this name, as CoreDNS picks a block.
    const rules = closestBlock(this.blocks(), q.key)?.rules;
    if (!rules?.length) return next(request);
    const to = rewriteQuestion(rules, q.key, q.qtype);
    if (to === undefined) return next(request);
    const bare = (rcode: number) =>
      buildBareResponse(q, rcode, { recursionAvailable: true, udpPayloadBytes: request.udpPayloadBytes });
    if (to === 'invalid') {
      this.counts.invalid++;
      return bare(RCODE.SERVFAIL);
    }
    this.counts.rewritten++;
    const inner: ForwarderRequest = { ...request, query: queryAs(q, to.name, to.qtype) };
    const back = (reply: Buffer | Iterable<Buffer> | undefined): Buffer => {
      const resolved = inner.resolved;
      if (resolved) {
        const wire = mapReply(resolved.wire, { name: q.key, qtype: q.qtype, qclass: q.qclass }, to);
        request.resolved = { wire, scanned: scanResponse(wire), route: resolved.route, fromNames: [to.name] };
        if (request.repliesFromResolved) return RESOLVED;
        return finishFromTemplate(wire, q, request.limitBytes, { udpPayloadBytes: request.udpPayloadBytes });
      }
      // Answered on the way without an upstream (a hosts name, a refusal): its rcode, our question.
      const first = Buffer.isBuffer(reply) ? reply : undefined;
      if (first && first.length >= 4 && (first.readUInt16BE(2) & RCODE_MASK) === RCODE.NOERROR) {
        const wire = mapReply(first, { name: q.key, qtype: q.qtype, qclass: q.qclass }, to);
        return finishFromTemplate(wire, q, request.limitBytes, { udpPayloadBytes: request.udpPayloadBytes });
      }
      return bare(first && first.length >= 4 ? first.readUInt16BE(2) & RCODE_MASK : RCODE.SERVFAIL);
    };
    const replied = next(inner);
    return replied instanceof Promise ? replied.then(back) : back(replied);
  }
}
