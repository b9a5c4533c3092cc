import { Buffer } from 'node:buffer';
import { type Next, QTYPE, RCODE, type Reply, replyFromSections, type Stage } from '@cluster-dns/wire';
import { type BlockScoped, scopedValue } from '../../config/block-scoped.js';
import type { ForwarderRequest } from '../../config/forwarder-request.js';

/** HINFO "ANY obsoleted" "See RFC 8482" (RFC 8482 §4.2, as CoreDNS words it): what an ANY query gets instead of every record. */
const HINFO_RDATA = Buffer.concat([
  Buffer.from([13]),
  Buffer.from('ANY obsoleted'),
  Buffer.from([12]),
  Buffer.from('See RFC 8482'),
]);

/**
 * A Corefile's `any` (coredns/coredns plugin/any): an ANY question is answered at once with one
 * synthesized HINFO record, TTL 8482, as RFC 8482 allows, instead of whatever the name holds.
 * Every other type goes on. (Without `any`, the forward stage already answers ANY with one RRset.)
 */
export class AnyStage implements Stage<ForwarderRequest> {
  readonly name = 'any';
  readonly counts = { answered: 0 };

  constructor(private readonly blocks: () => readonly BlockScoped<true>[]) {}

  serve(request: ForwarderRequest, next: Next<ForwarderRequest>): Reply | Promise<Reply> {
    const q = request.query;
    if (q.qtype !== QTYPE.ANY || !scopedValue(this.blocks(), q.key)) return next(request);
    this.counts.answered++;
    const hinfo = { name: q.key, type: QTYPE.HINFO, class: q.qclass, ttl: 8482, rdata: HINFO_RDATA };
    return replyFromSections(q, { rcode: RCODE.NOERROR, authoritative: false, answer: [hinfo] }, request.limitBytes, {
      udpPayloadBytes: request.udpPayloadBytes,
    });
  }
}
