import { HistogramStore, LabelledCounts } from '@cluster-dns/runtime';
import { type RejectReason, rcodeLabel } from '@cluster-dns/wire';

/** How long a server that did not echo our 0x20 case is asked in plain case. */
export const CASE_BLIND_MS = 3_600_000;

/**
 * What the forward stage counts of its upstreams, in plain numbers: dnsmasq's servers.bind (queries
 * and failures per server), CoreDNS's per-try series, the replies dropped as not ours, and the
 * servers that do not preserve case. Metrics read it at scrape time.
 */
export class UpstreamStats {
  private readonly perServer = new Map<string, { queries: number; failures: number }>();
  /** Every try, by server. */
  readonly requests = new LabelledCounts();
  /** Tries that got a reply, by server and rcode, and how long each took. */
  readonly responses = new LabelledCounts();
  readonly durations = new HistogramStore();
  /** Tries that got no reply (a timeout, an error). */
  readonly failures = new LabelledCounts();
  /** Whether each server's last try got a reply. */
  readonly lastAnswered = new Map<string, boolean>();
  /** Replies dropped because they do not answer a query of ours, by reason. */
  readonly rejectedByReason = new Map<RejectReason, number>();
  private readonly caseBlindUntil = new Map<string, number>();
  /** Server and reason pairs already told to `onFirstRejection` (a few per server at most). */
  private readonly told = new Set<string>();

  constructor(private readonly onFirstRejection?: (server: string, reason: RejectReason) => void) {}

  /** The servers.bind counters of one server, made on first use. */
  server(id: string): { queries: number; failures: number } {
    let counts = this.perServer.get(id);
    if (!counts) {
      counts = { queries: 0, failures: 0 };
      this.perServer.set(id, counts);
    }
    return counts;
  }

  servers(): ReadonlyMap<string, { queries: number; failures: number }> {
    return this.perServer;
  }

  /** One try: its rcode, or undefined when it got no reply. */
  tried(to: string, rcode: number | undefined, seconds: number): void {
    this.requests.inc(to, () => ({ to }));
    this.lastAnswered.set(to, rcode !== undefined);
    if (rcode === undefined) {
      this.failures.inc(to, () => ({ to }));
      return;
    }
    const rcodeName = rcodeLabel(rcode);
    const key = `${to}|${rcodeName}`;
    this.responses.inc(key, () => ({ to, rcode: rcodeName }));
    this.durations.observe(key, () => ({ to, rcode: rcodeName }), seconds);
  }

  rejected(server: string, reason: RejectReason): void {
    this.rejectedByReason.set(reason, (this.rejectedByReason.get(reason) ?? 0) + 1);
    const pair = `${server}/${reason}`;
    if (this.told.has(pair)) return;
    this.told.add(pair);
    this.onFirstRejection?.(server, reason);
  }

  rejectedTotal(): number {
    let total = 0;
    for (const n of this.rejectedByReason.values()) total += n;
    return total;
  }

  isCaseBlind(server: string, nowMs: number): boolean {
    const until = this.caseBlindUntil.get(server);
    if (until === undefined) return false;
    if (until > nowMs) return true;
    this.caseBlindUntil.delete(server);
    return false;
  }

  markCaseBlind(server: string, nowMs: number): void {
    this.caseBlindUntil.set(server, nowMs + CASE_BLIND_MS);
  }
}
