import { type DecodedRr, type Next, QTYPE, RCODE, type Reply, replyFromSections, type Stage } from '@cluster-dns/wire';
import { type BlockScoped, scopedValue } from '../../config/block-scoped.js';
import type { ForwarderRequest } from '../../config/forwarder-request.js';

/**
 * A Corefile's `whoami` (coredns/coredns plugin/whoami): every question its block gets is answered
 * with the asker's address (A or AAAA) and an SRV `_udp.NAME` (or `_tcp`) holding its port, both
 * in the additional section, TTL 0, as CoreDNS does. Operators' docs use it to check a server block.
 */
export class WhoamiStage implements Stage<ForwarderRequest> {
  readonly name = 'whoami';

  constructor(
    private readonly blocks: () => readonly BlockScoped<true>[],
    /** Whether a forward takes the name: CoreDNS's whoami comes after forward, so it answers only what none does. */
    private readonly forwarded: (name: ForwarderRequest['query']['key']) => boolean = () => false,
  ) {}

  serve(request: ForwarderRequest, next: Next<ForwarderRequest>): Reply | Promise<Reply> {
    const q = request.query;
    if (!scopedValue(this.blocks(), q.key) || this.forwarded(q.key)) return next(request);
    const { remoteAddress, remotePort, transport } = request.context;
    const address = remoteAddress.replace(/^::ffff:(?=\d+\.)/, '');
    const v6 = address.includes(':');
    const owner = q.qname.endsWith('.') ? q.qname : `${q.qname}.`;
    const additional: DecodedRr[] = [
      v6
        ? { name: owner, type: QTYPE.AAAA, class: q.qclass, ttl: 0, address }
        : { name: owner, type: QTYPE.A, class: q.qclass, ttl: 0, address },
      {
        name: owner === '.' ? `_${transport}.` : `_${transport}.${owner}`,
        type: QTYPE.SRV,
        class: q.qclass,
        ttl: 0,
        priority: 0,
        weight: 0,
        port: remotePort,
        target: '.',
      },
    ];
    return replyFromSections(
      q,
      { rcode: RCODE.NOERROR, authoritative: true, answer: [], additional },
      request.limitBytes,
      {
        udpPayloadBytes: request.udpPayloadBytes,
      },
    );
  }
}
