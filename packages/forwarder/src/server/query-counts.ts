import { HistogramStore, LabelledCounts, typeIndexOf } from '@cluster-dns/runtime';
import { type QueryOutcome, RCODE_MASK, rcodeLabel, typeLabel, u16 } from '@cluster-dns/wire';

/**
 * The server-level series every query adds to (CoreDNS's `coredns_dns_requests_total`,
 * `coredns_dns_responses_total` and `coredns_dns_request_duration_seconds`), as plain counts that
 * metrics.ts turns into series at scrape time. Two paths feed them: the query pipeline's observe
 * hook and the express lane's cache hits (hit-lane.ts), so both count alike.
 */
export class ServerQueryCounts {
  readonly requests = new LabelledCounts();
  readonly responses = new LabelledCounts();
  readonly duration = new HistogramStore();

  /** `base()`: the labels every series carries (CoreDNS's server and zone). */
  constructor(private readonly base: () => { server: string; zone: string }) {}

  /** One message through the query pipeline (its `observe` hook). */
  observe(outcome: QueryOutcome): void {
    const { query, reply, context } = outcome;
    if (!query) return;
    // The header's four bits: 16 rcodes, and a 17th for a message dropped unanswered.
    const rcode = reply ? u16(reply, 2) & RCODE_MASK : 16;
    this.count(query.qtype, context.transport === 'tcp', context.family === 6, rcode, outcome.seconds);
  }

  /**
   * One query: its type, whether it came over TCP or IPv6, the rcode of its reply (16 for a
   * message dropped unanswered) and the seconds it took (0 for a reply made at once).
   */
  count(qtype: number, tcp: boolean, v6: boolean, rcode: number, seconds: number): void {
    // Series keyed by small numbers: a query makes no string and hashes none.
    const type = typeIndexOf(qtype, typeLabel);
    // bump/record first: the labels' closure is made only for a series' first query.
    const key = type * 4 + (tcp ? 2 : 0) + (v6 ? 1 : 0);
    if (!this.requests.bump(key))
      this.requests.inc(key, () => ({
        ...this.base(),
        proto: tcp ? 'tcp' : 'udp',
        family: v6 ? '2' : '1',
        type: typeLabel(qtype),
      }));
    if (!this.duration.record(type, seconds))
      this.duration.observe(type, () => ({ ...this.base(), type: typeLabel(qtype) }), seconds);
    if (!this.responses.bump(rcode))
      this.responses.inc(rcode, () => ({
        ...this.base(),
        rcode: rcode === 16 ? 'dropped' : rcodeLabel(rcode),
        plugin: '',
      }));
  }
}
