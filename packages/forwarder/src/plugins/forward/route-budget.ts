import { ClusterDnsError } from '@cluster-dns/runtime';
import { Cancellation } from '@cluster-dns/wire';
import type { Route } from '../../config/route-table.js';

/** Why a question was given up before its servers answered: a newer one took its place. */
export class QueryJostledError extends ClusterDnsError {
  constructor(
    readonly route: string,
    readonly waitedMs: number,
  ) {
    super(
      'QUERY_JOSTLED',
      `gave up a question to ${route} after ${Math.round(waitedMs)} ms to make room for a newer one (its share of in-flight questions was full)`,
    );
  }
}

/** A question's place in its route's share, held until it settles. */
export interface BudgetSlot {
  /** Cancelled when a newer question pushes this one out (the exchange then ends at once). */
  readonly cancel: Cancellation;
  /** Gives the place back; safe to call twice, and after being pushed out. */
  release(): void;
}

interface Entry {
  readonly startedMs: number;
  readonly cancel: Cancellation;
}

/** What the budget counts per route, by the route's domain ('.' for the default upstreams). */
export interface RouteBudgetCounts {
  /** Questions refused because the route's share was full of young questions. */
  readonly refused: Map<string, number>;
  /** Questions given up to make room for newer ones. */
  readonly jostled: Map<string, number>;
}

/**
 * In-flight upstream questions, counted per route: the cluster zone, each reverse zone, each stub
 * domain and the default upstreams each have a share of `limit` of their own (CoreDNS's
 * `max_concurrent` is per forward block too), so a route whose servers are down or black-holed
 * fills only its own share, and the cluster zone is never refused for another route's traffic.
 * When a share is full, a newcomer pushes out the question that has waited longest if that one has
 * waited `jostleMs` or more (Unbound's jostle-timeout): a stuck server's old questions make way for
 * new ones, rather than every new one being refused until they time out. Otherwise the newcomer is
 * refused.
 */
export class RouteBudget {
  private readonly shares = new Map<string, Set<Entry>>();
  readonly counts: RouteBudgetCounts = { refused: new Map(), jostled: new Map() };

  constructor(
    private readonly limit: number,
    private readonly jostleMs: number,
    private readonly now: () => number,
  ) {}

  /** A slot in the route's share, or undefined when the share is full of questions younger than the jostle bound. */
  take(route: Route): BudgetSlot | undefined {
    const key = route.domain;
    let share = this.shares.get(key);
    if (share === undefined) {
      share = new Set();
      this.shares.set(key, share);
    }
    const nowMs = this.now();
    if (share.size >= this.limit) {
      // A Set keeps insertion order: the first entry is the oldest question.
      const oldest = share.values().next().value as Entry;
      const waitedMs = nowMs - oldest.startedMs;
      if (waitedMs < this.jostleMs) {
        bump(this.counts.refused, key);
        return undefined;
      }
      share.delete(oldest);
      bump(this.counts.jostled, key);
      oldest.cancel.cancel(new QueryJostledError(key, waitedMs));
    }
    const entry: Entry = { startedMs: nowMs, cancel: new Cancellation() };
    share.add(entry);
    const owner = share;
    return {
      cancel: entry.cancel,
      release: () => {
        if (!owner.delete(entry) || owner.size > 0) return;
        // An empty share is dropped: routes removed by a config reload leave nothing behind.
        if (this.shares.get(key) === owner) this.shares.delete(key);
      },
    };
  }

  /** Questions in flight now, over every route. */
  inFlight(): number {
    let n = 0;
    for (const share of this.shares.values()) n += share.size;
    return n;
  }

  /** Questions in flight now, by route domain. */
  inFlightByRoute(): Array<[string, number]> {
    return [...this.shares].map(([route, share]) => [route, share.size]);
  }

  /** Refusals over every route: CoreDNS's max_concurrent_rejects. */
  refusedTotal(): number {
    let n = 0;
    for (const count of this.counts.refused.values()) n += count;
    return n;
  }
}

function bump(counts: Map<string, number>, key: string): void {
  counts.set(key, (counts.get(key) ?? 0) + 1);
}
