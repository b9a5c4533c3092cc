import { readFileSync } from 'node:fs';
import net from 'node:net';
import { fixtures, freePort, launchProcess, runCommand, waitFor } from '@cluster-dns/testkit';
import { QTYPE, queryDns, RCODE } from '@cluster-dns/wire';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { createRecordBuilderMetrics } from '../src/metrics.js';
import { recordBuilderFlags } from '../src/options.js';
import { LOOPBACK_ARGS, MAIN, startRecordBuilder } from './harness.js';

const run = (args: string[]) => runCommand(process.execPath, [MAIN, ...args], { env: { KUBECONFIG: '' } });

describe('record-builder as a process', () => {
  it('lists every flag in --help and exits 0', async () => {
    const out = await run(['--help']);
    expect(out.status).toBe(0);
    for (const name of Object.keys(recordBuilderFlags)) expect(out.stdout).toContain(`--${name}`);
  });

  it('has every port and endpoint in its README, every flag and metric in its reference', () => {
    const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
    const reference = readFileSync(new URL('../../../docs/reference/record-builder.md', import.meta.url), 'utf8');
    expect(readme).toContain('docs/reference/record-builder.md');
    for (const name of Object.keys(recordBuilderFlags)) expect(reference).toContain(`\`--${name}\``);
    for (const word of ['/readiness', '/healthz', '/cache', '/metrics', '10053', '8081', '10055'])
      expect(readme).toContain(word);
    const registry = new Registry();
    createRecordBuilderMetrics(registry);
    const ours = registry.getMetricsAsArray().filter((m) => !/^(process|nodejs)_/.test(m.name));
    expect(ours.length).toBeGreaterThan(10);
    for (const metric of ours) expect(reference).toContain(`\`${metric.name}\``);
  });

  it.each([
    [['--dns-port=abc'], '--dns-port'],
    [['--bogus'], 'unknown flag: --bogus'],
    [['--domain=bad_domain'], '--domain'],
    [['--pods=sometimes'], '--pods'],
    [['--initial-sync-timeout=forever'], '--initial-sync-timeout'],
    [['--transfer-to=ns1.example.org'], '--transfer-to'],
  ])('exits 2 on %j naming the flag', async (args, message) => {
    const out = await run(args);
    expect(out.status).toBe(2);
    expect(out.stderr).toContain(message);
  });

  it('exits 2 on a PROMETHEUS_PORT that is not a port, naming it', async () => {
    const out = await runCommand(process.execPath, [MAIN, '--dns-port=0'], {
      env: { KUBECONFIG: '', PROMETHEUS_PORT: 'ten-o-fifty-five' },
    });
    expect(out.status).toBe(2);
    expect(out.stderr).toContain('PROMETHEUS_PORT');
  });

  it('serves /metrics on PROMETHEUS_PORT, as kube-dns.yaml sets it, unless --metrics-port says otherwise', async () => {
    const port = await freePort();
    const rb = await startRecordBuilder([], [], { env: { PROMETHEUS_PORT: String(port) } });
    expect(rb.metricsPort).toBe(port);
    expect(await (await fetch(`http://127.0.0.1:${port}/metrics`)).text()).toContain(
      'skydns_skydns_dns_request_count_total',
    );
    const explicit = await startRecordBuilder([], ['--metrics-port=0'], { env: { PROMETHEUS_PORT: String(port) } });
    expect(explicit.metricsPort).not.toBe(port);
  });

  it('exits 1 with a clear message when no API configuration can be found', async () => {
    const out = await run(['--dns-port=0', '--healthz-port=0', '--metrics-port=0']);
    expect(out.status).toBe(1);
    expect(out.stderr).toContain('no Kubernetes API configuration found');
  });

  it('accepts the kube-dns manifest arguments', async () => {
    const rb = await startRecordBuilder([], ['--domain=cluster.local.', '--config-dir=/nonexistent', '--v=2']);
    expect(rb.proc.ready.dnsPort).toBeGreaterThan(0);
  });

  it('exposes kube-dns metric names and its own, and dumps the store at /cache', async () => {
    const rb = await startRecordBuilder([fixtures.service('default', 'kubernetes', { clusterIPs: ['10.96.0.1'] })]);
    await rb.query('kubernetes.default.svc.cluster.local', QTYPE.A);
    await rb.query('nope.default.svc.cluster.local', QTYPE.A);
    await rb.query('1.0.96.10.in-addr.arpa', QTYPE.PTR);
    const scrape = async () => (await fetch(`http://127.0.0.1:${rb.metricsPort}/metrics`)).text();
    // Ready comes with the lists; a watch opening (its timestamp) may follow a moment later.
    await waitFor(async () => (await scrape()).includes('last_sync_timestamp_seconds{resource="endpointslices"}'), {
      what: 'both watches open',
    });
    const text = await scrape();
    expect(text).toMatch(/skydns_skydns_dns_request_count_total\{system="auth"\} 2/);
    expect(text).toMatch(/skydns_skydns_dns_request_count_total\{system="reverse"\} 1/);
    expect(text).toMatch(/skydns_skydns_dns_error_count_total\{system="auth",cause="nxdomain"\} 1/);
    expect(text).toContain('skydns_skydns_dns_request_duration_seconds_bucket');
    expect(text).toContain('skydns_skydns_dns_response_size_bytes_bucket');
    expect(text).toMatch(/clusterdns_recordbuilder_requests_total\{qtype="A",rcode="NXDOMAIN",transport="udp"\} 1/);
    expect(text).toMatch(/clusterdns_recordbuilder_services 1/);
    expect(text).toMatch(/clusterdns_recordbuilder_last_sync_timestamp_seconds\{resource="endpointslices"\}/);
    expect(text).toContain('process_resident_memory_bytes');
    const cache = (await (
      await fetch(`http://127.0.0.1:${rb.healthzPort}/cache?name=kubernetes.default.svc.cluster.local`)
    ).json()) as {
      names: Record<string, Array<{ address?: string }>>;
    };
    expect(cache.names['kubernetes.default.svc.cluster.local.']?.map((r) => r.address)).toEqual(['10.96.0.1']);
  });

  it('caps TCP connections per client and closes idle ones (--max-tcp-connections-per-client, --tcp-idle-timeout)', async () => {
    const rb = await startRecordBuilder(
      [fixtures.service('default', 'kubernetes', { clusterIPs: ['10.96.0.1'], ports: [{ name: 'https', port: 443 }] })],
      ['--max-tcp-connections-per-client=2', '--tcp-idle-timeout=1s'],
    );
    // Each connection's close is listened for from its start: the server may close one at once.
    const connect = () =>
      new Promise<{ socket: net.Socket; closed: Promise<number> }>((resolve) => {
        const socket = net.connect(rb.dnsPort, '127.0.0.1');
        const closed = new Promise<number>((r) => socket.once('close', () => r(Date.now())));
        socket.on('error', () => {});
        socket.once('connect', () => resolve({ socket, closed }));
      });
    const [a, b] = [await connect(), await connect()];
    const openedAt = Date.now();
    const third = await connect();
    // The third from the same address is closed while the first two are still open; they live
    // until idle (a lower bound: a busy machine can only close them later).
    await third.closed;
    expect(a.socket.destroyed || b.socket.destroyed).toBe(false);
    const [closedA, closedB] = await Promise.all([a.closed, b.closed]);
    expect(Math.min(closedA, closedB) - openedAt).toBeGreaterThanOrEqual(800);
    expect(
      (await rb.query('kubernetes.default.svc.cluster.local', QTYPE.A, { transport: 'tcp' })).answers,
    ).toHaveLength(1);
  });

  it('drains on SIGTERM: readiness fails during lameduck, then it exits 0', async () => {
    const rb = await startRecordBuilder([], ['--lameduck=2s']);
    const exit = rb.proc.stop('SIGTERM');
    await rb.proc.waitForLog((l) => l.msg === 'lameduck: readiness failing, still answering');
    expect((await fetch(`http://127.0.0.1:${rb.healthzPort}/readiness`)).status).toBe(503);
    expect((await rb.query('dns-version.cluster.local', QTYPE.TXT)).answers[0]?.text).toEqual(['1.1.0']);
    expect(await exit).toBe(0);
  });

  it('reads legacy v1 Endpoints with --endpoints-api=endpoints', async () => {
    const rb = await startRecordBuilder(
      [
        fixtures.service('data', 'old', { headless: true }),
        fixtures.endpoints('data', 'old', [{ ip: '10.244.8.1', hostname: 'old-0' }], [{ ip: '10.244.8.2' }]),
      ],
      ['--endpoints-api=endpoints'],
    );
    expect(await rb.resolver.resolve4('old.data.svc.cluster.local')).toEqual(['10.244.8.1']);
    expect(await rb.resolver.resolve4('old-0.old.data.svc.cluster.local')).toEqual(['10.244.8.1']);
    expect(rb.api.requests.some((r) => r.path.startsWith('/api/v1/endpoints'))).toBe(true);
  });

  it('lists by streaming where the API offers it (WatchList): the state, then the changes, on one request', async () => {
    const services = Array.from({ length: 1203 }, (_, i) =>
      fixtures.service('big', `s${i}`, { clusterIPs: [`10.97.${i >> 8}.${i & 255}`] }),
    );
    const rb = await startRecordBuilder(services);
    const asked = () => rb.api.requests.filter((r) => r.path.startsWith('/api/v1/services'));
    expect(asked()).toHaveLength(1);
    expect(asked()[0]).toMatchObject({ watch: true, status: 200 });
    expect(asked()[0]?.path).toMatch(/sendInitialEvents=true/);
    expect(asked()[0]?.path).toMatch(/resourceVersionMatch=NotOlderThan/);
    expect(rb.proc.ready.services).toBe(1203);
    // Every Service went down that one stream (bench case 13 reads this counter): ~200 octets each.
    expect(rb.api.bytesSent()).toBeGreaterThan(1203 * 200);
    expect(await rb.resolver.resolve4('s1202.big.svc.cluster.local')).toEqual(['10.97.4.178']);
    // The same stream goes on as the watch: a change comes with no second request.
    rb.api.apply(fixtures.service('big', 'later', { clusterIPs: ['10.97.9.9'] }));
    await waitFor(async () => (await rb.resolver.resolve4('later.big.svc.cluster.local')).includes('10.97.9.9'), {
      what: 'a change after the streamed list',
    });
    expect(asked()).toHaveLength(1);
  });

  it('lists a large cluster in pages of 500 where the API does not stream lists, and misses nothing', async () => {
    const services = Array.from({ length: 1203 }, (_, i) =>
      fixtures.service('big', `s${i}`, { clusterIPs: [`10.97.${i >> 8}.${i & 255}`] }),
    );
    const rb = await startRecordBuilder(services, [], { api: { watchList: false } });
    await rb.proc.waitForLog((l) => l.msg === 'the API server does not stream lists (WatchList); listing in pages');
    const lists = rb.api.requests.filter((r) => !r.watch && r.path.startsWith('/api/v1/services'));
    expect(lists.map((r) => /limit=(\d+)/.exec(r.path)?.[1])).toEqual(['500', '500', '500']);
    expect(lists.filter((r) => r.path.includes('continue='))).toHaveLength(2);
    expect(rb.proc.ready.services).toBe(1203);
    expect(await rb.resolver.resolve4('s1202.big.svc.cluster.local')).toEqual(['10.97.4.178']);
  });

  it('watches pods only with --pods=verified, and answers for their IPs only', async () => {
    const rb = await startRecordBuilder([fixtures.pod('shop', 'web-0', ['10.244.1.5'])], ['--pods=verified']);
    expect(await rb.resolver.resolve4('10-244-1-5.shop.pod.cluster.local')).toEqual(['10.244.1.5']);
    expect(rb.api.requests.some((r) => r.path.startsWith('/api/v1/pods'))).toBe(true);
  });
});

describe('record-builder shutdown before the first sync', () => {
  it('stops at once on SIGTERM while the API server is unreachable, never having been ready', async () => {
    const proc = await launchProcess({
      script: MAIN,
      // Nothing listens on port 1: every list fails and is retried. The lameduck is skipped: a
      // record-builder that was never ready has no traffic to wait out. Were it not, this one
      // minute would outlast the stop's 10 s, whose SIGKILL leaves no exit code.
      args: ['--kube-master-url=http://127.0.0.1:1', ...LOOPBACK_ARGS, '--lameduck=60s'],
      readyMsg: 'listening',
    });
    const healthzPort = proc.ready.healthzPort as number;
    await proc.waitForLog((l) => l.msg === 'watch failed; serving the last known state');
    expect((await fetch(`http://127.0.0.1:${healthzPort}/readiness`)).status).toBe(503);
    const reply = await queryDns({ host: '127.0.0.1', port: proc.ready.dnsPort as number }, 'a.b.svc.cluster.local', 1);
    expect(reply.flags.rcode).toBe(RCODE.SERVFAIL);
    expect(await proc.stop('SIGTERM', 10_000)).toBe(0);
    expect(proc.logs.some((l) => l.msg === 'ready')).toBe(false);
    expect(proc.logs.some((l) => String(l.msg).startsWith('lameduck'))).toBe(false);
  });
});
