import type { Logger } from '@cluster-dns/runtime';
import { buildBareResponse, finishFromTemplate, RCODE, type Reply, type Stage } from '@cluster-dns/wire';
import { type ForwarderRequest, RESOLVED } from '../../config/forwarder-request.js';
import type { RouteTable } from '../../config/route-table.js';
import { resolveQuestion } from './resolution.js';
import type { RouteBudget } from './route-budget.js';
import type { ForwardOptions } from './upstream.js';

export interface ForwardStageDeps {
  /** The routes in force now (a config reload swaps them). */
  routes(): RouteTable;
  /** Each route's share of upstream questions in flight; a question that finds its share full is REFUSED. */
  budget: RouteBudget;
  forward: ForwardOptions;
  log: Logger;
  logQueries: boolean;
}

/**
 * The end of the forwarder's chain: asks the route's servers (stub domain, `--server` domain, or
 * the upstreams). A local route (`--server=/domain/` without a server) is NXDOMAIN. No upstream
 * answering is SERVFAIL. A question takes a place in its route's share (route-budget.ts) for as
 * long as it is out: one that finds the share full is REFUSED, counted; one pushed out of it by a
 * newer question ends at once with SERVFAIL.
 */
export class ForwardStage implements Stage<ForwarderRequest> {
  readonly name = 'forward';
  private readonly pending = new Set<Promise<unknown>>();

  constructor(private readonly deps: ForwardStageDeps) {}

  /** Questions in flight upstream now. */
  inFlight(): number {
    return this.pending.size;
  }

  /** Queries refused because their route's share was full (CoreDNS's max_concurrent_rejects). */
  get maxConcurrentRejects(): number {
    return this.deps.budget.refusedTotal();
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
    // A Corefile zone no forward takes: CoreDNS's "no next plugin found".
    if (route.kind === 'unserved') {
      request.error = new Error('plugin/forward: no next plugin found');
      return bare(RCODE.SERVFAIL);
    }
    const slot = this.deps.budget.take(route);
    if (slot === undefined) return bare(RCODE.REFUSED);
    const question = {
      name: q.key,
      qtype: q.qtype,
      qclass: q.qclass,
      dnssecOk: q.edns?.dnssecOk ?? false,
      checkingDisabled: q.cd,
      // Not for a walk's steps, the first one included: a walk made here must not be made again behind.
      ...(route.carryClient && !request.ownQuestion && request.walkedFor === undefined
        ? { clientAddress: context.remoteAddress }
        : {}),
      ...(request.ednsOptions?.length ? { options: request.ednsOptions } : {}),
    };
    const forward = { ...this.deps.forward, cancel: slot.cancel };
    const asked = resolveQuestion(routes, route, question, forward).then(
      (resolved) => {
        request.resolved = resolved;
        if (request.repliesFromResolved) return RESOLVED;
        return finishFromTemplate(resolved.wire, q, request.limitBytes, { udpPayloadBytes: request.udpPayloadBytes });
      },
      (error: unknown) => {
        this.deps.log.debug('upstream failure', { qname: q.key, qtype: q.qtype, err: error });
        request.error = error instanceof Error ? error : new Error(String(error));
        return bare(RCODE.SERVFAIL);
      },
    );
    this.pending.add(asked);
    void asked.finally(() => {
      slot.release();
      this.pending.delete(asked);
    });
    return asked;
  }
}
