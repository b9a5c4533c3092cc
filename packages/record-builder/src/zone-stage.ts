import {
  buildBareResponse,
  type DnsRequest,
  type Fqdn,
  isInZone,
  isLoopback,
  type Next,
  questionInZone,
  RCODE,
  type Reply,
  type Stage,
  writeName,
} from '@cluster-dns/wire';

import { clientMapZone } from './cluster-state.js';
import type { ZoneView } from './zone-view.js';

/** A request down the record-builder's chain: the zone stage notes which of our zones it is in. */
export interface ZoneRequest extends DnsRequest {
  /** The served zone (the cluster zone or a reverse zone) the question is in; set by ZoneStage. */
  zone?: Fqdn;
}

/**
 * The record-builder's first stage: which of its zones a question is in. Names outside them are
 * REFUSED (not a recursor, no AA); until the first lists are in, SERVFAIL (never an NXDOMAIN for a
 * name that may exist); a name with an escaped octet cannot be a Kubernetes name (DNS-1123):
 * NXDOMAIN. The zone found is left on the request, for the answer and for metrics.
 */
export class ZoneStage implements Stage<ZoneRequest> {
  readonly name = 'zones';

  /** Our zones in wire form, the cluster zone first (as zoneOf), matched against the question's octets. */
  private readonly zones: ReadonlyArray<readonly [Fqdn, Uint8Array]>;

  /** The client map (which namespace each pod address is in): answered to this host only. */
  private readonly clientMap: Fqdn;

  constructor(
    view: ZoneView,
    private readonly isReady: () => boolean,
  ) {
    this.zones = servedZones(view).map((zone) => [zone, writeName(zone)] as const);
    this.clientMap = clientMapZone(view.zone);
  }

  /** The zone the question is in (answer-builder's zoneOf, on the octets: no name string made). */
  private zoneOf(q: ZoneRequest['query']): Fqdn | undefined {
    for (const [zone, wire] of this.zones) if (questionInZone(q, wire)) return zone;
    return undefined;
  }

  serve(request: ZoneRequest, next: Next<ZoneRequest>): Reply | Promise<Reply> {
    const q = request.query;
    const zone = this.zoneOf(q);
    if (!zone) return bare(request, RCODE.REFUSED);
    request.zone = zone;
    if (!this.isReady()) return bare(request, RCODE.SERVFAIL);
    if (q.hasEscapes) return bare(request, RCODE.NXDOMAIN, true);
    // The Pod's forwarder asks from this host (it reads the client map for the node caches too);
    // a pod that reaches this port on the Pod's address does not learn every pod's namespace.
    if (isInZone(q.key, this.clientMap) && !isLoopback(request.context.remoteAddress))
      return bare(request, RCODE.REFUSED);
    return next(request);
  }
}

/**
 * Every zone answered: the cluster zone first, the clusterset zone when served, k8s_external's,
 * the reverse zones.
 */
export const servedZones = (view: Pick<ZoneView, 'zone' | 'clustersetZone' | 'reverseZones' | 'external'>): Fqdn[] => [
  view.zone,
  ...(view.clustersetZone ? [view.clustersetZone] : []),
  ...(view.external ?? []).map((e) => e.zone),
  ...view.reverseZones,
];

/** A reply with no records; a function, not a closure made per query as the stage once had. */
function bare(request: ZoneRequest, rcode: number, authoritative = false): Reply {
  return buildBareResponse(request.query, rcode, { authoritative, udpPayloadBytes: request.udpPayloadBytes });
}
