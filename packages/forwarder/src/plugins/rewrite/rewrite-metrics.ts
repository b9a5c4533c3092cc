import { labelledFrom } from '@cluster-dns/runtime';
import type { Registry } from 'prom-client';

/** The rewrite stage's counts (CoreDNS's rewrite has no series of its own). */
export function registerRewriteMetrics(registry: Registry, counts: { rewritten: number; invalid: number }): void {
  labelledFrom(
    registry,
    'clusterdns_forwarder_rewritten_total',
    'Questions a rewrite rule matched: rewritten, or answered SERVFAIL because a rule made no domain name (invalid).',
    ['result'],
    () => [
      [{ result: 'rewritten' }, counts.rewritten],
      [{ result: 'invalid' }, counts.invalid],
    ],
  );
}
