import {
  buildBareResponse,
  FLAG,
  finishFromTemplate,
  MessageWriter,
  type Next,
  QTYPE,
  RCODE,
  type Reply,
  type Stage,
} from '@cluster-dns/wire';
import { type BlockScoped, scopedValue } from '../../config/block-scoped.js';
import type { ForwarderRequest } from '../../config/forwarder-request.js';
import type { HostsTable } from './hosts-table.js';

/**
 * A Corefile's `hosts`: names of its table answered here (AA, its TTL), A, AAAA and PTR. A name
 * in its zones that it does not have goes on with `fallthrough`, else is SERVFAIL, as CoreDNS
 * (without a SOA it cannot say NXDOMAIN). Its answers are not cached: they cost a lookup.
 */
export class HostsStage implements Stage<ForwarderRequest> {
  readonly name = 'hosts';
  readonly counts = { answered: 0 };

  constructor(private readonly tables: () => readonly BlockScoped<HostsTable>[]) {}

  serve(request: ForwarderRequest, next: Next<ForwarderRequest>): Reply | Promise<Reply> {
    const q = request.query;
    // The table of the block that serves the name (its longest key), if the name is in the table's zones.
    const table = scopedValue(this.tables(), q.key);
    if (!table?.covers(q.key)) return next(request);
    const found = table.lookup(q.key, q.qtype);
    const supported = q.qtype === QTYPE.A || q.qtype === QTYPE.AAAA || q.qtype === QTYPE.PTR;
    if (found === 'nodata' && !supported && table.unsupportedFallsThrough(q.key)) return next(request);
    if (found === 'absent') {
      if (table.fallsThrough(q.key)) return next(request);
      return buildBareResponse(q, RCODE.SERVFAIL, {
        recursionAvailable: true,
        udpPayloadBytes: request.udpPayloadBytes,
      });
    }
    this.counts.answered++;
    const writer = new MessageWriter(512).question(q.key, q.qtype, q.qclass);
    if (found !== 'nodata') for (const rr of found.records) writer.record(1, rr);
    const template = writer.finish(0, FLAG.QR | FLAG.AA | FLAG.RA);
    return finishFromTemplate(template, q, request.limitBytes, { udpPayloadBytes: request.udpPayloadBytes });
  }
}
