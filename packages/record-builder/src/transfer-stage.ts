import {
  buildBareResponse,
  type Fqdn,
  ixfrQuerySerial,
  type Next,
  QTYPE,
  RCODE,
  type Reply,
  type Stage,
} from '@cluster-dns/wire';
import type { ZoneView } from './answer-builder.js';
import type { ZoneRequest } from './zone-stage.js';
import { incrementalTransfer, zoneTransfer } from './zone-transfer.js';

/**
 * Zone transfers, for the forwarders kept fresh by push and for secondaries: AXFR over TCP only,
 * IXFR from the journal (over UDP the current SOA alone, RFC 1995 §2), to allowed addresses only.
 * Other questions go on.
 */
export class TransferStage implements Stage<ZoneRequest> {
  readonly name = 'transfers';

  constructor(
    private readonly view: ZoneView,
    private readonly allowed: (address: string) => boolean,
    private readonly onTransfer?: (type: 'axfr' | 'ixfr', result: 'incremental' | 'full' | 'current') => void,
  ) {}

  serve(request: ZoneRequest, next: Next<ZoneRequest>): Reply | Promise<Reply> {
    const { query: q, context } = request;
    if (q.qtype !== QTYPE.AXFR && q.qtype !== QTYPE.IXFR) return next(request);
    const bare = (rcode: number, authoritative = false) =>
      buildBareResponse(q, rcode, { authoritative, udpPayloadBytes: request.udpPayloadBytes });
    const zone = request.zone as Fqdn;
    if (!this.allowed(context.remoteAddress)) return bare(RCODE.REFUSED);
    if (q.qtype === QTYPE.AXFR) {
      if (context.transport !== 'tcp') return bare(RCODE.REFUSED);
      this.onTransfer?.('axfr', 'full');
      return zoneTransfer(this.view, zone, q);
    }
    const serial = ixfrQuerySerial(q.raw);
    if (serial === undefined) return bare(RCODE.FORMERR, true);
    const transfer = incrementalTransfer(
      this.view,
      zone,
      q,
      context.transport === 'tcp' ? serial : this.view.state.serial,
    );
    this.onTransfer?.('ixfr', transfer.result);
    return transfer.messages;
  }
}
