import {
  type DecodedMessage,
  type Fqdn,
  isInZone,
  type Next,
  QTYPE,
  RCODE,
  type Reply,
  replyFromSections,
  type Stage,
} from '@cluster-dns/wire';
import type { ForwarderRequest } from '../../config/forwarder-request.js';
import type { FileZone, ZoneAnswer } from './file-zone.js';

export interface FileStageDeps {
  /** The zones read (a reload swaps them). */
  zones(): readonly FileZone[];
  /** Looks a CNAME's target outside the zone up through the whole chain; undefined if it cannot. */
  lookup?(request: ForwarderRequest, name: Fqdn, qtype: number): Promise<DecodedMessage | undefined>;
}

/** The zone of `zones` whose origin is the longest holding `name`. */
function zoneFor(zones: readonly FileZone[], name: Fqdn): FileZone | undefined {
  let best: FileZone | undefined;
  for (const z of zones)
    if (isInZone(name, z.origin) && (best === undefined || z.origin.length > best.origin.length)) best = z;
  return best;
}

/**
 * A Corefile's `file` (coredns/coredns plugin/file): names in a zone read from an RFC 1035 file
 * answered authoritatively (file-zone.ts). A name it has no records for goes on with `fallthrough`
 * in its zones; a CNAME chain that leaves the zone is finished through the chain (SERVFAIL, with
 * the chain so far, when that finds nothing), as CoreDNS's upstream does.
 */
export class FileStage implements Stage<ForwarderRequest> {
  readonly name = 'file';
  readonly counts = { answered: 0 };

  constructor(private readonly deps: FileStageDeps) {}

  serve(request: ForwarderRequest, next: Next<ForwarderRequest>): Reply | Promise<Reply> {
    const zones = this.deps.zones();
    if (zones.length === 0) return next(request);
    const q = request.query;
    const zone = zoneFor(zones, q.key);
    if (!zone) return next(request);
    const found = zone.lookup(q.key, q.qtype);
    const falls =
      zone.fallthrough !== undefined &&
      (zone.fallthrough.length === 0 || zone.fallthrough.some((z) => isInZone(q.key, z)));
    // A name with no records here (NXDOMAIN, or an empty non-terminal) goes on where it falls through.
    if (found.missing && found.answer.length === 0 && falls) return next(request);
    this.counts.answered++;
    if (found.outside === undefined) return this.reply(request, found);
    const lookup = this.deps.lookup;
    const servfail = { ...found, rcode: RCODE.SERVFAIL };
    if (!lookup || (q.qtype !== QTYPE.A && q.qtype !== QTYPE.AAAA)) return this.reply(request, servfail);
    return lookup(request, found.outside, q.qtype).then((m) =>
      m?.answers.length
        ? this.reply(request, { ...found, answer: [...found.answer, ...m.answers] })
        : this.reply(request, servfail),
    );
  }

  private reply(request: ForwarderRequest, found: ZoneAnswer): Reply {
    return replyFromSections(
      request.query,
      {
        rcode: found.rcode,
        authoritative: found.authoritative,
        answer: found.answer,
        authority: found.authority,
        additional: found.additional,
      },
      request.limitBytes,
      { udpPayloadBytes: request.udpPayloadBytes },
    );
  }
}
