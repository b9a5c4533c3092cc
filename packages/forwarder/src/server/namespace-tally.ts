import { Counter, type Registry } from 'prom-client';

/** The series for queries from clients the client map does not know (a node, a hostNetwork pod). */
export const UNKNOWN_NAMESPACE = 'unknown';
/** The series for every namespace past the first N, and for clients past the per-client bound. */
export const OTHER_NAMESPACES = 'other';

/**
 * Queries by the asking pod's namespace, with a bounded number of series: each scrape takes the
 * per-client totals (the doors' ClientTally, every worker's), looks each client that asked since
 * the last scrape up in the record-builder's client map (a cache hit mostly), and adds what it
 * asked since to its namespace. The first `limit` namespaces seen get a series each, for good; the
 * rest, and clients past the per-client bound, go to `other`, so every series only grows (a
 * counter) and there are at most limit + 2. A client's queries go to the namespace it has at the
 * scrape after them: an address reused by a pod of another namespace between two scrapes takes
 * the queries of the old pod's last interval with it.
 */
export class NamespaceTally {
  private readonly lastByClient = new Map<string, number>();
  private lastOverflow = 0;
  private readonly byNamespace = new Map<string, number>();
  private refreshing: Promise<void> = Promise.resolve();

  constructor(private readonly limit: number) {}

  /** Adds what each client asked since the last refresh; one refresh at a time. */
  refresh(
    totals: Iterable<[string, number]>,
    overflow: number,
    namespaceOf: (client: string) => Promise<string | undefined>,
  ): Promise<void> {
    const run = this.refreshing.then(async () => {
      const seen = new Map<string, number>();
      for (const [client, total] of totals) seen.set(client, (seen.get(client) ?? 0) + total);
      for (const [client, total] of seen) {
        const delta = total - (this.lastByClient.get(client) ?? 0);
        this.lastByClient.set(client, total);
        if (delta <= 0) continue;
        this.add((await namespaceOf(client)) ?? UNKNOWN_NAMESPACE, delta);
      }
      if (overflow > this.lastOverflow) this.add(OTHER_NAMESPACES, overflow - this.lastOverflow);
      this.lastOverflow = Math.max(this.lastOverflow, overflow);
    });
    this.refreshing = run.catch(() => undefined);
    return run;
  }

  private add(namespace: string, count: number): void {
    const key =
      this.byNamespace.has(namespace) ||
      namespace === UNKNOWN_NAMESPACE ||
      namespace === OTHER_NAMESPACES ||
      this.namedSeries() < this.limit
        ? namespace
        : OTHER_NAMESPACES;
    this.byNamespace.set(key, (this.byNamespace.get(key) ?? 0) + count);
  }

  private namedSeries(): number {
    let n = 0;
    for (const key of this.byNamespace.keys()) if (key !== UNKNOWN_NAMESPACE && key !== OTHER_NAMESPACES) n++;
    return n;
  }

  /** Each series and its total. */
  series(): Array<[string, number]> {
    return [...this.byNamespace];
  }
}

/**
 * clusterdns_forwarder_namespace_queries_total from a NamespaceTally, refreshed at each scrape
 * (the client map is read then, through the cache): by the forwarder alone, or by a pool. Here
 * rather than in metrics.ts, which a lane imports for its listener helpers: a lane loads no
 * metrics library.
 */
export function namespaceQueriesMetric(registry: Registry, tally: NamespaceTally, refresh: () => Promise<void>): void {
  const seen = new Map<string, number>();
  new Counter({
    name: 'clusterdns_forwarder_namespace_queries_total',
    help: 'Queries by the asking pod’s namespace (--namespace-metrics), from the record-builder’s client map: the first N namespaces seen each a series, the rest "other", clients no pod holds (a node, a hostNetwork pod) "unknown".',
    labelNames: ['namespace'],
    registers: [registry],
    async collect() {
      await refresh().catch(() => undefined);
      for (const [namespace, now] of tally.series()) {
        const before = seen.get(namespace) ?? 0;
        if (now > before) this.labels({ namespace }).inc(now - before);
        seen.set(namespace, Math.max(before, now));
      }
    },
  });
}
