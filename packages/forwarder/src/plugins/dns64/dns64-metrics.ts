import { labelledFrom } from '@cluster-dns/runtime';
import type { Registry } from 'prom-client';

/** CoreDNS's dns64 series, read from the stage's count at scrape time. */
export function registerDns64Metrics(registry: Registry, counts: { translated: number }, server: () => string): void {
  labelledFrom(
    registry,
    'coredns_dns64_requests_translated_total',
    'AAAA questions answered by synthesis from A records.',
    ['server'],
    () => [[{ server: server() }, counts.translated]],
  );
}
