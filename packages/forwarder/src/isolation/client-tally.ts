/** Addresses counted one by one at most; queries from any further address are counted together. */
export const MAX_TALLIED_CLIENTS = 4096;

/**
 * Queries per asking client (the sender, or the pod a trusted node cache names), bounded: the
 * first MAX_TALLIED_CLIENTS addresses each, every later one in `overflow`. Plain numbers a scrape
 * reads and turns into per-namespace counts (namespace-tally.ts); a node's pods or a cluster's
 * node caches fit well under the bound.
 */
export class ClientTally {
  private readonly byClient = new Map<string, number>();
  overflow = 0;

  count(client: string): void {
    const seen = this.byClient.get(client);
    if (seen !== undefined) this.byClient.set(client, seen + 1);
    else if (this.byClient.size < MAX_TALLIED_CLIENTS) this.byClient.set(client, 1);
    else this.overflow++;
  }

  /** Every address with its total since start. */
  entries(): Array<[string, number]> {
    return [...this.byClient];
  }
}
