import type { Reply } from './dns-handler.js';
import type { DnsRequest } from './pipeline.js';

/** What the rest of a chain does with a request: the next stage, or the chain's end. */
export type Next<R extends DnsRequest = DnsRequest> = (request: R) => Reply | Promise<Reply>;

/**
 * One stage of a query chain, as a CoreDNS plugin is: it answers the request itself, or hands it
 * to `next` (and may look at what comes back). A stage owns its state and its counters, which
 * metrics read at scrape time. An answer a stage has at hand is returned as is, not in a promise:
 * a cache hit costs no microtask.
 */
export interface Stage<R extends DnsRequest = DnsRequest> {
  /** For logs and docs: "cache", "forward". */
  readonly name: string;
  serve(request: R, next: Next<R>): Reply | Promise<Reply>;
}

/**
 * The stages in order, ending in `end` (what a request that every stage passed on gets), as one
 * handler for createQueryPipeline. The links are made once, here, not per query.
 */
export function chainStages<R extends DnsRequest>(stages: readonly Stage<R>[], end: Next<R>): Next<R> {
  let next = end;
  for (let i = stages.length - 1; i >= 0; i--) {
    const stage = stages[i] as Stage<R>;
    const after = next;
    next = (request) => stage.serve(request, after);
  }
  return next;
}
