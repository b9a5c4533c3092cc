import { Buffer } from 'node:buffer';
import {
  buildBareResponse,
  closestBlock,
  ednsOptions,
  finishFromTemplate,
  type Next,
  RCODE,
  type Reply,
  type Stage,
} from '@cluster-dns/wire';
import { type ForwarderRequest, queryAs } from '../../config/forwarder-request.js';
import type { RewriteAsker } from './edns0-rewrite.js';
import { mapReply, rewriteQuestion, type ScopedRewrites } from './rewrite-rules.js';

/** What edns0 rules read of a request: the client (the sender), and its OPT's options, read once if asked. */
function askerOf(request: ForwarderRequest): RewriteAsker {
  const { context, query } = request;
  return {
    remoteAddress: context.remoteAddress,
    remotePort: context.remotePort,
    transport: context.transport,
    options: () => (query.edns ? ednsOptions(query.raw) : undefined),
  };
}

/**
 * A Corefile's `rewrite` (coredns/coredns plugin/rewrite): a question whose name, type or class a
 * rule matches goes on as rewritten, with the EDNS0 options edns0 rules set going upstream with
 * it, and its answer comes back to the question asked: the question restored, owner names and
 * targets mapped back as the rule says (`answer auto`, always for exact; `answer name`, `answer
 * value`), TTLs (ttl rules) and the RCODE (rcode rules) rewritten. Before the cache and acl, in
 * CoreDNS's order since 1.14.2 (coredns#7882): the cache keeps the answer under the rewritten
 * name, where a pushed change of that name drops it, and an acl judges the name really asked.
 */
export class RewriteStage implements Stage<ForwarderRequest> {
  readonly name = 'rewrite';
  readonly counts = { rewritten: 0, invalid: 0 };

  constructor(private readonly blocks: () => readonly ScopedRewrites[]) {}

  serve(request: ForwarderRequest, next: Next<ForwarderRequest>): Reply | Promise<Reply> {
    const blocks = this.blocks();
    if (blocks.length === 0) return next(request);
    const q = request.query;
    // The rules of the block that serves this name, as CoreDNS picks a block.
    const rules = closestBlock(blocks, q.key)?.rules;
    if (!rules?.length) return next(request);
    const to = rewriteQuestion(rules, q.key, q.qtype, q.qclass, askerOf(request));
    if (to === undefined) return next(request);
    if (to === 'invalid') {
      this.counts.invalid++;
      return buildBareResponse(q, RCODE.SERVFAIL, {
        recursionAvailable: true,
        udpPayloadBytes: request.udpPayloadBytes,
      });
    }
    this.counts.rewritten++;
    const asked = to.name === q.key && to.qtype === q.qtype && to.qclass === q.qclass;
    const inner: ForwarderRequest = {
      ...request,
      query: asked ? q : queryAs(q, to.name, to.qtype, to.qclass),
      ...(to.options ? { ednsOptions: to.options } : {}),
    };
    const back = (reply: Reply): Reply => {
      if (inner.error) request.error = inner.error;
      const first = Buffer.isBuffer(reply) && reply.length >= 12 ? reply : undefined;
      // Nothing to send (a dropped query) stays nothing.
      if (!first) return reply;
      const wire = mapReply(first, { name: q.key, qtype: q.qtype, qclass: q.qclass }, to);
      return finishFromTemplate(wire, q, request.limitBytes, { udpPayloadBytes: request.udpPayloadBytes });
    };
    const replied = next(inner);
    return replied instanceof Promise ? replied.then(back) : back(replied);
  }
}
