import { Resolver } from 'node:dns/promises';
import { fileURLToPath } from 'node:url';
import {
  hasCommand,
  type LaunchedProcess,
  launchProcess,
  runChecked,
  startTestUpstream,
  type TestUpstream,
  waitFor,
} from '@cluster-dns/testkit';
import { QTYPE, queryDns } from '@cluster-dns/wire';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const DEMO = fileURLToPath(new URL('../packages/testkit/dist/demo.js', import.meta.url));
const hasDig = hasCommand('dig');

let stack: LaunchedProcess;
let upstream: TestUpstream;
let ports: { dnsPort: number; recordBuilderPort: number; sidecarPort: number; healthzPort: number; apiUrl: string };
let resolver: Resolver;

const api = async (method: string, path: string, body?: unknown) => {
  const res = await fetch(`${ports.apiUrl}${path}`, {
    method,
    headers: { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  expect(res.status).toBeLessThan(300);
};
const get = async (path: string) => {
  const res = await fetch(`http://127.0.0.1:${ports.sidecarPort}${path}`);
  return { status: res.status, text: await res.text() };
};
/** What the record-builder logged lately, for a failure message. */
const recordBuilderNotes = () =>
  stack.logs
    .map((l) => String(l.msg))
    .filter((m) => m.startsWith('record-builder') && /"level":"(warn|error)"|watch|restart/.test(m))
    .slice(-8)
    .join(' | ');
/**
 * dig, run without blocking this process: the test upstream that outside names are forwarded to
 * lives here, and a synchronous exec would keep it from answering (a miss then timed out).
 */
const dig = async (...args: string[]) =>
  (
    await runChecked('dig', ['@127.0.0.1', '-p', String(ports.dnsPort), '+short', '+time=2', '+tries=1', ...args])
  ).trim();

beforeAll(async () => {
  upstream = await startTestUpstream({
    records: {
      'example.org.': [{ type: QTYPE.A, address: '192.0.2.80' }],
      'payments.example.org.': [{ type: QTYPE.A, address: '192.0.2.50' }],
      '8.2.0.192.in-addr.arpa.': [{ type: QTYPE.PTR, target: 'host.example.org.' }],
    },
  });
  // The whole stack as separate processes: demo API server, record-builder, forwarder, sidecar.
  stack = await launchProcess({
    script: DEMO,
    args: [
      '--dns-port=0',
      '--record-builder-port=0',
      '--healthz-port=0',
      '--metrics-port=0',
      '--sidecar-port=0',
      `--upstream=${upstream.address}`,
      '--probe-interval=1',
      '--poll-interval-ms=200',
      '--lameduck=200ms',
    ],
    readyTimeoutMs: 60_000,
  });
  ports = stack.ready as unknown as typeof ports;
  resolver = new Resolver({ timeout: 2000, tries: 2 });
  resolver.setServers([`127.0.0.1:${ports.dnsPort}`]);
}, 90_000);

afterAll(async () => {
  await stack?.stop('SIGKILL');
  await upstream?.close();
});

describe('the three-process stack, through its public ports only', () => {
  it('answers service A/AAAA, SRV, PTR, headless and ExternalName through the forwarder', async () => {
    expect(await resolver.resolve4('kubernetes.default.svc.cluster.local')).toEqual(['10.96.0.1']);
    expect(await resolver.resolve6('api.shop.svc.cluster.local')).toEqual(['fd00:10:96::30']);
    expect(await resolver.resolveSrv('_https._tcp.frontend.shop.svc.cluster.local')).toEqual([
      { name: 'frontend.shop.svc.cluster.local', port: 443, priority: 10, weight: 100 },
    ]);
    expect(await resolver.reverse('10.96.10.10')).toEqual(['frontend.shop.svc.cluster.local']);
    expect((await resolver.resolve4('postgres.data.svc.cluster.local')).sort()).toEqual(['10.244.1.31', '10.244.2.32']);
    expect(await resolver.resolve4('postgres-0.postgres.data.svc.cluster.local')).toEqual(['10.244.1.31']);
    expect(await resolver.resolve4('payments.shop.svc.cluster.local')).toEqual(['192.0.2.50']);
  });

  it('forwards outside names and outside PTRs upstream', async () => {
    expect(await resolver.resolve4('example.org')).toEqual(['192.0.2.80']);
    expect(await resolver.reverse('192.0.2.8')).toEqual(['host.example.org']);
    expect(upstream.queries.map((q) => q.name)).toContain('8.2.0.192.in-addr.arpa.');
  });

  it('answers dig the same way when dig is installed', async () => {
    const expected = ['10.96.0.1', '10 100 443 frontend.shop.svc.cluster.local.', 'payments.example.org.\n192.0.2.50'];
    const got = hasDig
      ? [
          await dig('kubernetes.default.svc.cluster.local'),
          await dig('SRV', '_https._tcp.frontend.shop.svc.cluster.local'),
          await dig('payments.shop.svc.cluster.local'),
        ]
      : [
          (await resolver.resolve4('kubernetes.default.svc.cluster.local')).join(''),
          (await resolver.resolveSrv('_https._tcp.frontend.shop.svc.cluster.local'))
            .map((s) => `${s.priority} ${s.weight} ${s.port} ${s.name}.`)
            .join(''),
          `payments.example.org.\n${(await resolver.resolve4('payments.shop.svc.cluster.local')).join('')}`,
        ];
    expect(got).toEqual(expected);
    if (hasDig) expect(await dig('+tcp', 'cart.shop.svc.cluster.local')).toBe('10.96.10.20');
  });

  it('shows API changes through the forwarder: a service created, an endpoint turned ready, a service deleted', async () => {
    await api('POST', '/api/v1/namespaces/shop/services', {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'fresh', namespace: 'shop' },
      spec: {
        clusterIP: '10.96.10.99',
        clusterIPs: ['10.96.10.99'],
        ports: [{ name: 'http', port: 80, protocol: 'TCP' }],
      },
    });
    await waitFor(
      async () =>
        (await resolver.resolve4('fresh.shop.svc.cluster.local').catch((): string[] => [])).includes('10.96.10.99'),
      {
        what: 'the new service',
      },
    );
    await api('PUT', '/apis/discovery.k8s.io/v1/namespaces/data/endpointslices/postgres-5kq8d', {
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: { name: 'postgres-5kq8d', namespace: 'data', labels: { 'kubernetes.io/service-name': 'postgres' } },
      addressType: 'IPv4',
      endpoints: ['10.244.1.31', '10.244.2.32', '10.244.3.33'].map((ip, i) => ({
        addresses: [ip],
        hostname: `postgres-${i}`,
        conditions: { ready: true, serving: true, terminating: false },
      })),
      ports: [{ name: 'pg', port: 5432, protocol: 'TCP' }],
    });
    // Not cached yet through the forwarder under this name (negative answers are not cached with
    // kube-dns's --no-negcache), so it shows as soon as the record-builder has the event.
    const name = 'postgres-2.postgres.data.svc.cluster.local';
    await waitFor(async () => (await resolver.resolve4(name).catch((): string[] => [])).includes('10.244.3.33'), {
      what: 'the endpoint turning ready',
      timeoutMs: 20_000,
    }).catch(async (error: Error) => {
      // Say where it is stuck: the record-builder itself, or the forwarder in front of it.
      const direct = new Resolver({ timeout: 2000, tries: 1 });
      direct.setServers([`127.0.0.1:${ports.recordBuilderPort}`]);
      const seen = await direct.resolve4(name).catch((e: NodeJS.ErrnoException) => e.code);
      error.message += `; the record-builder answers ${JSON.stringify(seen)}; it logged: ${recordBuilderNotes()}`;
      throw error;
    });
    // A positive answer is cached for its TTL (30 s), as with kube-dns: asked through the forwarder
    // before the record-builder has the deletion, the old address would be served until it
    // expires. So wait for the record-builder to drop it, then ask through the forwarder.
    await api('DELETE', '/api/v1/namespaces/shop/services/legacy');
    const direct = new Resolver({ timeout: 2000, tries: 1 });
    direct.setServers([`127.0.0.1:${ports.recordBuilderPort}`]);
    await waitFor(
      async () => (await direct.resolve4('legacy.shop.svc.cluster.local').catch((e) => e.code)) === 'ENOTFOUND',
      {
        what: 'the record-builder to drop the deleted service',
      },
    );
    expect(await resolver.resolve4('legacy.shop.svc.cluster.local').catch((e) => e.code)).toBe('ENOTFOUND');
  }, 60_000);

  it('reports healthy probes and the forwarder cache hits in the sidecar metrics', async () => {
    await waitFor(async () => (await get('/healthcheck/kubedns')).status === 200, { what: 'kubedns healthy' });
    await waitFor(async () => (await get('/healthcheck/dnsmasq')).status === 200, { what: 'dnsmasq healthy' });
    expect(JSON.parse((await get('/healthcheck/kubedns')).text)).toMatchObject({ IsOk: true, Err: '' });
    expect((await get('/healthz')).status).toBe(200);
    const server = { host: '127.0.0.1', port: ports.dnsPort };
    const hits = async () => Number(/^kubedns_dnsmasq_hits (\d+)/m.exec((await get('/metrics')).text)?.[1] ?? 0);
    const before = await hits();
    for (let i = 0; i < 5; i++) await queryDns(server, 'cart.shop.svc.cluster.local', QTYPE.A);
    await waitFor(async () => (await hits()) >= before + 4, { what: 'the hits in the metrics' });
    const readiness = await fetch(`http://127.0.0.1:${ports.healthzPort}/readiness`);
    expect(readiness.status).toBe(200);
  });

  it('drains and exits 0 on SIGTERM, every process', async () => {
    const code = await stack.stop('SIGTERM', 20_000);
    expect(code).toBe(0);
    const stopped = stack.logs.filter((l) => l.msg === 'stopped' && l.process);
    expect(stopped.map((l) => [l.process, l.exitCode])).toEqual([
      ['sidecar', 0],
      ['forwarder', 0],
      ['record-builder', 0],
    ]);
  });
});
