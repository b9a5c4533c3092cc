import type { Next, Reply, Stage } from '@cluster-dns/wire';
import { type BlockScoped, scopedValue } from '../../config/block-scoped.js';
import type { ForwarderRequest } from '../../config/forwarder-request.js';

/**
 * A Corefile's `bufsize SIZE` (coredns/coredns plugin/bufsize): a query with EDNS0 goes on asking for
 * at most SIZE octets over UDP (a query without EDNS0 stays without), so no reply is built bigger
 * than the path's MTU allows and IP fragmentation is never asked for (DNS flag day 2020).
 */
export class BufsizeStage implements Stage<ForwarderRequest> {
  readonly name = 'bufsize';
  readonly counts = { lowered: 0 };

  constructor(private readonly blocks: () => readonly BlockScoped<number>[]) {}

  serve(request: ForwarderRequest, next: Next<ForwarderRequest>): Reply | Promise<Reply> {
    const size = scopedValue(this.blocks(), request.query.key);
    const edns = request.query.edns;
    if (size === undefined || !edns || request.context.transport !== 'udp' || request.limitBytes <= size)
      return next(request);
    // In place, as CoreDNS sets the request's OPT: every stage after, and the reply, see the smaller size.
    (request as { limitBytes: number }).limitBytes = size;
    this.counts.lowered++;
    return next(request);
  }
}
