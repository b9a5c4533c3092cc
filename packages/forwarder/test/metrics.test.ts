import dgram from 'node:dgram';
import { readFileSync } from 'node:fs';
import { waitFor } from '@cluster-dns/testkit';
import { buildQueryMessage, encodeMessage, QTYPE, RCODE } from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import { startForwarder, upstream } from './harness.js';

const scrape = async (port: number) => (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
/** The value of one series, its labels given in any order; 0 when absent. */
function value(text: string, name: string, labels: Record<string, string> = {}): number {
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    const inside = /\{(.*)\}/.exec(line)?.[1] ?? '';
    if (Object.entries(labels).every(([k, v]) => inside.includes(`${k}="${v}"`)))
      return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return 0;
}

describe('the forwarder’s own metrics, with CoreDNS’s names', () => {
  it('counts requests, responses, latency, cache, upstreams and coalescing as CoreDNS names them', async () => {
    // Each question waits at least 50 ms upstream (a lower bound: a busy machine only adds to it).
    const up = await upstream({
      records: { 'a.example.org.': [{ type: QTYPE.A, address: '192.0.2.1' }] },
      delayMs: 50,
    });
    const dead = await upstream({ behaviour: 'drop' });
    const f = await startForwarder([
      `--server=/dead.test/${dead.address}`,
      `--server=${up.address}`,
      '--upstream-timeout=200ms',
      '--forward-deadline=300ms',
    ]);
    // Two identical misses at once (one coalesced), a hit, an NXDOMAIN, one over TCP, a dead route.
    // Sent in one synchronous block: the forwarder, in this process, reads both before it can have
    // any answer, so the second joins the first whatever the machine's load.
    const socket = dgram.createSocket('udp4');
    const replies: Buffer[] = [];
    socket.on('message', (m) => replies.push(m));
    await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', () => resolve()));
    for (const id of [1, 2])
      socket.send(encodeMessage(buildQueryMessage(id, 'a.example.org', QTYPE.A)), f.port, '127.0.0.1');
    await waitFor(() => replies.length === 2, { what: 'both answers', seen: () => replies.length });
    socket.close();
    await f.query('a.example.org', QTYPE.A);
    await f.query('nope.example.org', QTYPE.A);
    await f.query('a.example.org', QTYPE.A, { transport: 'tcp' });
    expect((await f.query('x.dead.test', QTYPE.A)).flags.rcode).toBe(RCODE.SERVFAIL);
    const text = await scrape(f.metricsPort);
    const server = `dns://127.0.0.1:${f.port}`;

    expect(value(text, 'coredns_dns_requests_total', { server, zone: '.', proto: 'udp', family: '1', type: 'A' })).toBe(
      5,
    );
    expect(value(text, 'coredns_dns_requests_total', { proto: 'tcp', type: 'A' })).toBe(1);
    expect(value(text, 'coredns_dns_responses_total', { rcode: 'NOERROR' })).toBe(4);
    expect(value(text, 'coredns_dns_responses_total', { rcode: 'NXDOMAIN' })).toBe(1);
    expect(value(text, 'coredns_dns_responses_total', { rcode: 'SERVFAIL' })).toBe(1);
    expect(value(text, 'coredns_dns_request_duration_seconds_count', { type: 'A' })).toBe(6);
    // The misses waited ≥ 50 ms upstream: they are above the 25.6 ms bucket, the hits below it.
    expect(value(text, 'coredns_dns_request_duration_seconds_bucket', { type: 'A', le: '0.0256' })).toBeLessThan(6);

    expect(value(text, 'coredns_cache_hits_total', { server, type: 'success' })).toBe(2);
    expect(value(text, 'coredns_cache_misses_total', { server })).toBe(4);
    expect(value(text, 'coredns_cache_entries', { type: 'success' })).toBe(1);
    expect(value(text, 'coredns_cache_entries', { type: 'denial' })).toBe(1);
    expect(value(text, 'clusterdns_forwarder_coalesced_queries_total')).toBe(1);

    expect(value(text, 'coredns_forward_requests_total', { to: up.address })).toBe(2);
    expect(value(text, 'coredns_forward_responses_total', { to: up.address, rcode: 'NOERROR' })).toBe(1);
    expect(value(text, 'coredns_forward_responses_total', { to: up.address, rcode: 'NXDOMAIN' })).toBe(1);
    expect(value(text, 'coredns_forward_request_duration_seconds_count', { to: up.address, rcode: 'NOERROR' })).toBe(1);
    expect(value(text, 'coredns_forward_healthcheck_failures_total', { to: dead.address })).toBe(1);
    expect(value(text, 'clusterdns_forwarder_upstream_healthy', { to: up.address })).toBe(1);
    expect(value(text, 'clusterdns_forwarder_upstream_healthy', { to: dead.address })).toBe(0);
    expect(value(text, 'clusterdns_forwarder_upstream_in_flight')).toBe(0);
  });

  it('labels any query type it has no name for "other", so no client can grow the series without bound', async () => {
    const up = await upstream({});
    const f = await startForwarder([`--server=${up.address}`]);
    for (const type of [999, 1000, 65280, 65281]) await f.query('x.example.org', type);
    const text = await scrape(f.metricsPort);
    expect(value(text, 'coredns_dns_requests_total', { type: 'other' })).toBe(4);
    expect(text).not.toMatch(/type="TYPE\d+"/);
  });

  it('names every metric it exports in its reference (docs/reference/forwarder.md)', async () => {
    const up = await upstream({});
    const f = await startForwarder([`--server=${up.address}`]);
    await f.query('x.example.org', QTYPE.A);
    const names = new Set(
      (await scrape(f.metricsPort))
        .split('\n')
        .filter((l) => l.startsWith('# TYPE '))
        .map((l) => l.split(' ')[2] as string)
        .filter((n) => !n.startsWith('process_') && !n.startsWith('nodejs_')),
    );
    const reference = readFileSync(new URL('../../../docs/reference/forwarder.md', import.meta.url), 'utf8');
    expect([...names].filter((n) => !reference.includes(`\`${n}\``))).toEqual([]);
    expect(names.size).toBeGreaterThan(25);
  });
});
