import type { Logger } from '@cluster-dns/runtime';
import {
  buildBareResponse,
  type DnsRequest,
  finishFromTemplate,
  RCODE,
  type Reply,
  type Stage,
} from '@cluster-dns/wire';
import { type Resolved, resolveQuestion } from './resolution.js';
import type { RouteTable } from './route-table.js';
import type { ForwardOptions } from './upstream.js';

/** A request as it goes down the forwarder's chain: the forward stage leaves what it resolved here. */
export interface ForwarderRequest extends DnsRequest {
  /**
   * The upstream's answer, normalised (ID 0, canonical question, no OPT), with the route that gave
   * it: for the stages before, the cache, to keep. Unset when no upstream answered.
   */
  resolved?: Resolved;
}

export interface ForwardStageDeps {
  /** The routes in force now (a config reload swaps them). */
  routes(): RouteTable;
  /** Upstream questions in flight at most; past it, REFUSED at once (CoreDNS's max_concurrent). */
  forwardMax: number;
  forward: ForwardOptions;
  log: Logger;
  logQueries: boolean;
}

/**
 * The end of the forwarder's chain: asks the route's servers (stub domain, `--server` domain, or
 * the upstreams). A local route (`--server=/domain/` without a server) is NXDOMAIN. No upstream
 * answering is SERVFAIL. Past `forwardMax` questions in flight, REFUSED, counted.
 */
export class ForwardStage implements Stage<ForwarderRequest> {
  readonly name = 'forward';
  /** Queries refused because `forwardMax` questions were in flight. */
  maxConcurrentRejects = 0;
  private readonly pending = new Set<Promise<unknown>>();

  constructor(private readonly deps: ForwardStageDeps) {}

  /** Questions in flight upstream now. */
  inFlight(): number {
    return this.pending.size;
  }

  /** Resolves when every question now in flight has settled (the drain at shutdown). */
  async settled(): Promise<void> {
    await Promise.allSettled([...this.pending]);
  }

  serve(request: ForwarderRequest): Reply | Promise<Reply> {
    const { query: q, context } = request;
    const bare = (rcode: number) =>
      buildBareResponse(q, rcode, { recursionAvailable: true, udpPayloadBytes: request.udpPayloadBytes });
    const routes = this.deps.routes();
    const route = routes.routeFor(q.key);
    if (this.deps.logQueries)
      this.deps.log.info('query', { qname: q.qname, qtype: q.qtype, from: context.remoteAddress, route: route.domain });
    if (route.kind === 'local') return bare(RCODE.NXDOMAIN);
    if (this.pending.size >= this.deps.forwardMax) {
      this.maxConcurrentRejects++;
      return bare(RCODE.REFUSED);
    }
    const question = {
      name: q.key,
      qtype: q.qtype,
      qclass: q.qclass,
      dnssecOk: q.edns?.dnssecOk ?? false,
      checkingDisabled: q.cd,
    };
    const asked = resolveQuestion(routes, route, question, this.deps.forward).then(
      (resolved) => {
        request.resolved = resolved;
        return finishFromTemplate(resolved.wire, q, request.limitBytes, { udpPayloadBytes: request.udpPayloadBytes });
      },
      (error: unknown) => {
        this.deps.log.debug('upstream failure', { qname: q.key, qtype: q.qtype, err: error });
        return bare(RCODE.SERVFAIL);
      },
    );
    this.pending.add(asked);
    void asked.finally(() => this.pending.delete(asked));
    return asked;
  }
}
