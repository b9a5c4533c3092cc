import {
  buildBareResponse,
  type DnsRequest,
  type Fqdn,
  type Next,
  RCODE,
  type Reply,
  type Stage,
} from '@cluster-dns/wire';

/**
 * --dns-loop-detect's other half: a query for one of the names we sent upstream to probe for a
 * forwarding loop has come back to us, so the upstream it went to loops (loop-detect.ts disables
 * it). It is REFUSED here, never forwarded again.
 */
export class LoopGuardStage implements Stage {
  readonly name = 'loop guard';
  /** Probes of ours that came back. */
  refused = 0;

  constructor(private readonly probes: { outstanding(): boolean; isProbe(name: Fqdn): boolean }) {}

  serve(request: DnsRequest, next: Next): Reply | Promise<Reply> {
    // Only while probes are out is a name worth making and looking up.
    if (!this.probes.outstanding() || !this.probes.isProbe(request.query.key)) return next(request);
    this.refused++;
    return buildBareResponse(request.query, RCODE.REFUSED, {
      recursionAvailable: true,
      udpPayloadBytes: request.udpPayloadBytes,
    });
  }
}
