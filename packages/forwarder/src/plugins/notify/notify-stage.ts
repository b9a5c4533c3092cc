import {
  buildBareResponse,
  type DnsRequest,
  decodeNotifyChanges,
  decodeProgrammingTimes,
  ednsOption,
  type Next,
  NOTIFY_CHANGES_OPTION,
  OPCODE,
  PROGRAMMING_TIMES_OPTION,
  QTYPE,
  RCODE,
  type Reply,
  type Stage,
} from '@cluster-dns/wire';
import type { ZoneSync } from './zone-sync.js';

/**
 * DNS NOTIFY (RFC 1996) from the record-builder: the zone changed. Answered once the changes are
 * fetched (IXFR) and the cache entries they make stale are dropped (zone-sync.ts), so the sender
 * times the whole path; a failed fetch gets SERVFAIL and the sender retries. One that carries the
 * names changed since the last (notify-changes.ts) is answered once they are dropped. Refused from anyone
 * but the zone's own servers, and for anything but SOA. Queries go on.
 */
export class NotifyStage implements Stage {
  readonly name = 'notify';
  /** NOTIFYs from a server of the zone (whether or not the fetch that followed worked), and others. */
  readonly counts = { accepted: 0, refused: 0 };

  constructor(private readonly zones: ZoneSync | undefined) {}

  serve(request: DnsRequest, next: Next): Reply | Promise<Reply> {
    const q = request.query;
    if (q.opcode !== OPCODE.NOTIFY) return next(request);
    const refused = () => {
      this.counts.refused++;
      return buildBareResponse(q, RCODE.REFUSED, {
        recursionAvailable: true,
        udpPayloadBytes: request.udpPayloadBytes,
      });
    };
    if (!this.zones || q.qtype !== QTYPE.SOA) return refused();
    // The names it carries (our record-builder's, to node caches); unreadable: a plain NOTIFY.
    const data = q.edns === undefined ? undefined : ednsOption(q.raw, NOTIFY_CHANGES_OPTION);
    const changes = data && decodeNotifyChanges(data, q.key);
    const times = changes && ednsOption(q.raw, PROGRAMMING_TIMES_OPTION);
    const programmed = times ? decodeProgrammingTimes(times) : undefined;
    return this.zones.notify(q.key, request.context.remoteAddress, changes, programmed).then((result) => {
      if (result === 'refused') return refused();
      this.counts.accepted++;
      return result === 'accepted'
        ? buildBareResponse(q, RCODE.NOERROR, { authoritative: true })
        : buildBareResponse(q, RCODE.SERVFAIL, { recursionAvailable: true, udpPayloadBytes: request.udpPayloadBytes });
    });
  }
}
