import { readFileSync } from 'node:fs';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  fixtures,
  type LaunchedProcess,
  launchProcess,
  runCommand,
  startApiServer,
  startTestUpstream,
  waitFor,
} from '@cluster-dns/testkit';
import { QTYPE, queryDns } from '@cluster-dns/wire';
import { afterEach, describe, expect, it } from 'vitest';
import { sidecarFlags } from '../src/options.js';

const dist = (pkg: string) => fileURLToPath(new URL(`../../${pkg}/dist/main.js`, import.meta.url));
const SIDECAR = dist('sidecar');
const stops: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const s of stops.splice(0).reverse()) await s();
});

async function launch(script: string, args: string[]) {
  const proc = await launchProcess({ script, args });
  stops.push(() => proc.stop('SIGKILL'));
  return proc;
}

/** The record-builder on testkit and the forwarder in front of it, as separate processes. */
async function dnsPair(forwarderPort = 0) {
  const api = await startApiServer({
    objects: [
      fixtures.service('default', 'kubernetes', { clusterIPs: ['10.96.0.1'], ports: [{ name: 'https', port: 443 }] }),
    ],
  });
  stops.push(() => api.close());
  const kubeconfig = join(await mkdtemp(join(tmpdir(), 'sc-')), 'kubeconfig');
  await writeFile(kubeconfig, api.kubeconfigYaml());
  const rbArgs = [
    `--kubecfg-file=${kubeconfig}`,
    '--dns-bind-address=127.0.0.1',
    '--healthz-port=0',
    '--metrics-port=0',
    '--lameduck=0s',
  ];
  const rb = await launch(dist('record-builder'), [...rbArgs, '--dns-port=0']);
  const rbPort = rb.ready.dnsPort as number;
  const fwArgs = [
    '-k',
    '--no-resolv',
    '--cache-size=1000',
    `--server=/cluster.local/127.0.0.1#${rbPort}`,
    '--listen-address=127.0.0.1',
    '--lameduck=0s',
    '--metrics-port=0',
    '--metrics-address=127.0.0.1',
  ];
  const fw = await launch(dist('forwarder'), [...fwArgs, `--port=${forwarderPort}`]);
  return { rb, rbPort, rbArgs, fw, fwPort: fw.ready.port as number, fwArgs };
}

async function sidecar(args: string[]): Promise<{ proc: LaunchedProcess; url: string }> {
  const proc = await launch(SIDECAR, ['--prometheus-addr=127.0.0.1', '--prometheus-port=0', '--v=2', ...args]);
  return { proc, url: `http://127.0.0.1:${proc.ready.port}` };
}

const get = async (url: string) => {
  const res = await fetch(url);
  return { status: res.status, text: await res.text() };
};

describe('sidecar against the real record-builder and forwarder', () => {
  it('reports each probe with kube-dns JSON, /healthz, /readyz and 404 for an unknown label', async () => {
    const pair = await dnsPair();
    // A silent target: its first probe cannot finish before its timeout, so the state before the
    // first result is there to read however the random start delay falls.
    const silent = await startTestUpstream({ behaviour: 'drop' });
    stops.push(() => silent.close());
    const s = await sidecar([
      `--probe=kubedns,127.0.0.1:${pair.rbPort},kubernetes.default.svc.cluster.local,1,SRV`,
      `--probe=dnsmasq,127.0.0.1:${pair.fwPort},kubernetes.default.svc.cluster.local,1,SRV`,
      `--probe=missing,127.0.0.1:${pair.rbPort},nope.default.svc.cluster.local,1,A`,
      `--probe=first,127.0.0.1:${silent.port},a.example.org,5,A`,
      `--dnsmasq-port=${pair.fwPort}`,
    ]);
    const before = await get(`${s.url}/healthcheck/first`);
    expect(before.status).toBe(503);
    expect(JSON.parse(before.text)).toEqual({ IsOk: false, LatencySeconds: 0, Err: 'waiting for first probe' });
    await waitFor(async () => (await get(`${s.url}/healthcheck/dnsmasq`)).status === 200, {
      what: 'the dnsmasq probe',
    });
    await waitFor(async () => (await get(`${s.url}/healthcheck/kubedns`)).status === 200, {
      what: 'the kubedns probe',
    });
    const ok = JSON.parse((await get(`${s.url}/healthcheck/kubedns`)).text);
    expect(ok).toMatchObject({ IsOk: true, Err: '' });
    expect(ok.LatencySeconds).toBeGreaterThan(0);
    expect(ok.LatencySeconds).toBeLessThan(1);
    await waitFor(async () => (await get(`${s.url}/healthcheck/missing`)).text.includes('no RRs'), {
      what: 'the failing probe',
    });
    expect(JSON.parse((await get(`${s.url}/healthcheck/missing`)).text)).toEqual({
      IsOk: false,
      LatencySeconds: 0,
      Err: 'no RRs for domain "nope.default.svc.cluster.local."',
    });
    expect((await get(`${s.url}/healthcheck/unknown`)).status).toBe(404);
    const healthz = await get(`${s.url}/healthz`);
    expect(healthz.status).toBe(200);
    expect(healthz.text).toMatch(/^ok \(/);
    const verbose = await get(`${s.url}/healthz?verbose`);
    expect(verbose.status).toBe(503);
    expect(JSON.parse(verbose.text).Probes.kubedns.IsOk).toBe(true);
    expect((await get(`${s.url}/readyz`)).status).toBe(503);
  });

  it('fails the kubedns probe at its first failed probe after the record-builder dies, and recovers after a restart', async () => {
    const pair = await dnsPair();
    const s = await sidecar([
      `--probe=kubedns,127.0.0.1:${pair.rbPort},kubernetes.default.svc.cluster.local,1,SRV`,
      `--dnsmasq-port=${pair.fwPort}`,
    ]);
    await waitFor(async () => (await get(`${s.url}/healthcheck/kubedns`)).status === 200, {
      what: 'the first success',
    });
    // The forwarder holds the probe's answer in its cache: the kubedns probe must not be fooled.
    const name = 'kubernetes.default.svc.cluster.local';
    expect((await queryDns({ host: '127.0.0.1', port: pair.fwPort }, name, QTYPE.SRV)).answers).toHaveLength(1);
    await pair.rb.stop('SIGKILL');
    // The first probe that fails turns the check red: no run of failures is waited for (the
    // probe's error counter, read before the check, can only have counted that far already).
    const errors = async () =>
      Number(/^kubedns_probe_kubedns_errors (\S+)$/m.exec((await get(`${s.url}/metrics`)).text)?.[1] ?? 0);
    const before = await errors();
    await waitFor(async () => (await errors()) > before, { what: 'a failed kubedns probe', seen: errors });
    expect((await get(`${s.url}/healthcheck/kubedns`)).status).toBe(503);
    expect((await queryDns({ host: '127.0.0.1', port: pair.fwPort }, name, QTYPE.SRV)).answers).toHaveLength(1);
    const again = await launch(dist('record-builder'), [...pair.rbArgs, `--dns-port=${pair.rbPort}`]);
    expect(again.ready.dnsPort).toBe(pair.rbPort);
    await waitFor(async () => (await get(`${s.url}/healthcheck/kubedns`)).status === 200, {
      what: 'the recovery',
      timeoutMs: 5000,
    });
    const metrics = (await get(`${s.url}/metrics`)).text;
    expect(Number(/kubedns_probe_kubedns_errors (\d+)/.exec(metrics)?.[1])).toBeGreaterThan(0);
  });

  it('turns the forwarder cache statistics into kubedns_dnsmasq_* counters that never go down', async () => {
    const pair = await dnsPair();
    const s = await sidecar([`--dnsmasq-port=${pair.fwPort}`, '--dnsmasq-poll-interval-ms=200']);
    const server = { host: '127.0.0.1', port: pair.fwPort };
    for (let i = 0; i < 11; i++) await queryDns(server, 'kubernetes.default.svc.cluster.local', QTYPE.A);
    const metric = async (name: string) =>
      Number(new RegExp(`^${name} (\\S+)$`, 'm').exec((await get(`${s.url}/metrics`)).text)?.[1]);
    await waitFor(async () => (await metric('kubedns_dnsmasq_hits')) === 10, { what: '10 hits' });
    expect(await metric('kubedns_dnsmasq_misses')).toBe(1);
    expect(await metric('kubedns_dnsmasq_insertions')).toBe(1);
    expect(await metric('kubedns_dnsmasq_max_size')).toBe(1000);
    // Restart the forwarder on the same port: its raw counters start again from zero.
    await pair.fw.stop('SIGKILL');
    await waitFor(async () => (await metric('kubedns_dnsmasq_errors')) > 0, { what: 'a failed poll' });
    expect(await metric('kubedns_dnsmasq_hits')).toBe(10);
    const fw2 = await launch(dist('forwarder'), [...pair.fwArgs, `--port=${pair.fwPort}`]);
    expect(fw2.ready.port).toBe(pair.fwPort);
    // Once a poll has read the restarted forwarder's low raw values, growth counts from them.
    await s.proc.waitForLog((l) => l.msg === 'forwarder statistics poll recovered');
    for (let i = 0; i < 4; i++) await queryDns(server, 'kubernetes.default.svc.cluster.local', QTYPE.A);
    await waitFor(async () => (await metric('kubedns_dnsmasq_hits')) === 13, { what: '3 more hits after the restart' });
    expect(await metric('kubedns_dnsmasq_max_size')).toBe(1000);
  });

  it('exposes every kube-dns metric name, with the namespace from the flag', async () => {
    const pair = await dnsPair();
    const s = await sidecar([
      `--probe=kubedns,127.0.0.1:${pair.rbPort},kubernetes.default.svc.cluster.local,1,SRV`,
      `--dnsmasq-port=${pair.fwPort}`,
      '--dnsmasq-poll-interval-ms=200',
      '--prometheus-namespace=skydns',
      '--prometheus-path=/prom',
    ]);
    await waitFor(async () => (await get(`${s.url}/healthcheck/kubedns`)).status === 200, { what: 'a probe' });
    const text = (await get(`${s.url}/prom`)).text;
    const names = new Set(
      text
        .split('\n')
        .filter((l) => l && !l.startsWith('#'))
        .map((l) => l.split(/[{ ]/)[0]),
    );
    for (const n of ['hits', 'misses', 'evictions', 'insertions', 'max_size', 'errors'])
      expect(names).toContain(`skydns_dnsmasq_${n}`);
    expect(names).toContain('skydns_probe_kubedns_errors');
    expect(names).toContain('skydns_probe_kubedns_latency_ms_bucket');
    expect(text).toContain('skydns_probe_kubedns_latency_ms_bucket{le="0.25"}');
    expect(text).toContain('skydns_probe_kubedns_latency_ms_bucket{le="8192"}');
    expect(names).toContain('process_cpu_seconds_total');
    expect(names).toContain('nodejs_eventloop_lag_seconds');
    expect((await get(`${s.url}/metrics`)).status).toBe(404);
  });

  it('keeps serving HTTP while a probe target is silent or answers garbage', async () => {
    const silent = await startTestUpstream({ behaviour: 'drop' });
    const garbage = await startTestUpstream({ behaviour: 'servfail' });
    stops.push(
      () => silent.close(),
      () => garbage.close(),
    );
    const s = await sidecar([
      `--probe=silent,127.0.0.1:${silent.port},a.example.org,1,A`,
      `--probe=garbage,127.0.0.1:${garbage.port},a.example.org,1,A`,
      `--dnsmasq-port=${silent.port}`,
      '--dnsmasq-poll-interval-ms=300',
    ]);
    await waitFor(async () => JSON.parse((await get(`${s.url}/healthcheck/silent`)).text).Err.includes('no reply'), {
      what: 'the timeout',
      timeoutMs: 5000,
    });
    // Answered while a probe waits on its silent target: a bound only a blocked server would cross.
    const started = Date.now();
    expect((await get(`${s.url}/healthz`)).status).toBe(200);
    expect(Date.now() - started).toBeLessThan(1000);
    await waitFor(async () => JSON.parse((await get(`${s.url}/healthcheck/garbage`)).text).Err.includes('no RRs'), {
      what: 'the SERVFAIL probe to fail',
      timeoutMs: 5000,
    });
    expect(s.proc.child.exitCode).toBeNull();
    expect(await s.proc.stop('SIGTERM')).toBe(0);
  });
});

describe('sidecar flags', () => {
  const run = (args: string[]) => runCommand(process.execPath, [SIDECAR, ...args]);

  it('rejects a malformed --probe with the expected form', async () => {
    const out = await run(['--probe=kubedns,127.0.0.1']);
    expect(out.status).toBe(2);
    expect(out.stderr).toContain('--probe');
    expect(out.stderr).toContain('<label>,<server>,<dns name>');
  });

  it('accepts the kube-dns manifest arguments and lists every flag in --help and the README', async () => {
    const out = await run([
      '--v=2',
      '--logtostderr',
      '--probe=kubedns,127.0.0.1:10053,kubernetes.default.svc.cluster.local,5,SRV',
      '--probe=dnsmasq,127.0.0.1:53,kubernetes.default.svc.cluster.local,5,SRV',
      '--help',
    ]);
    expect(out.status).toBe(0);
    const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
    for (const name of Object.keys(sidecarFlags)) {
      expect(out.stdout).toContain(`--${name}`);
      expect(readme).toContain(`--${name}`);
    }
  });
});
