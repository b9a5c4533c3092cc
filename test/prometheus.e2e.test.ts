import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  freePort,
  hasCommand,
  type LaunchedProcess,
  launchProcess,
  loopbackNodeCacheArgs,
  runCommand,
  waitFor,
} from '@cluster-dns/testkit';
import { QTYPE, queryDns } from '@cluster-dns/wire';
import { loadYaml } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dist, type Stack, startStack } from './support/stack.js';

// A real Prometheus scraping the three metrics endpoints of the stack and a node cache, labelled
// as the Prometheus operator labels what the ServiceMonitors select (job kube-dns and job
// node-local-dns, namespace, container); promtool's lint on each endpoint; every PromQL
// expression of the dashboard and the alerts run against it, and shown to be scoped.
const root = fileURLToPath(new URL('..', import.meta.url));
const missing = ['prometheus', 'promtool'].filter((c) => !hasCommand(c));
const INSTALL = 'apt-get install -y prometheus';
if (missing.length)
  console.warn(`skipping the Prometheus tests: ${missing.join(', ')} not installed; run: ${INSTALL} (.ci/run does)`);

/**
 * promtool's findings that are kube-dns's names, kept on purpose so kube-dns dashboards keep
 * working (README: "Metric names promtool flags"). Any other finding fails the test.
 */
const DELIBERATE_FINDINGS: Record<'record-builder' | 'sidecar' | 'forwarder', RegExp[]> = {
  'record-builder': [],
  sidecar: [
    /^kubedns_dnsmasq_(hits|misses|evictions|insertions|max_size|errors) counter metrics should have "_total" suffix$/,
    /^kubedns_probe_\w+_errors counter metrics should have "_total" suffix$/,
    /^kubedns_probe_\w+_latency_ms metric names should not contain abbreviated units$/,
  ],
  forwarder: [],
};

let stack: Stack;
let sidecar: LaunchedProcess;
let nodeCache: LaunchedProcess;
let nodeCachePort = 0;
let nodeCacheMetricsPort = 0;
let prometheus: ReturnType<typeof spawn> | undefined;
let promUrl = '';
const targets = () => ({
  'record-builder': stack.rb.ready.metricsPort as number,
  forwarder: stack.fw.ready.metricsPort as number,
  sidecar: sidecar.ready.port as number,
});

describe.skipIf(missing.length > 0)('a real Prometheus scraping the stack', () => {
  beforeAll(async () => {
    stack = await startStack();
    sidecar = await launchProcess({
      script: dist('sidecar'),
      args: [
        '--prometheus-addr=127.0.0.1',
        '--prometheus-port=0',
        `--probe=kubedns,127.0.0.1:${stack.rbPort},kubernetes.default.svc.cluster.local,1,A`,
        `--probe=dnsmasq,127.0.0.1:${stack.fwPort},kubernetes.default.svc.cluster.local,1,A`,
        `--dnsmasq-port=${stack.fwPort}`,
        '--dnsmasq-poll-interval-ms=500',
      ],
    });
    // A node cache in front of the stack's forwarder, on loopback (no link, no rules).
    nodeCachePort = await freePort();
    nodeCacheMetricsPort = await freePort();
    const block = (zone: string) =>
      `${zone}:${nodeCachePort} {\n    bind 127.0.0.1\n    cache 30\n    forward . 127.0.0.1:${stack.fwPort} {\n        force_tcp\n    }\n    prometheus 127.0.0.1:${nodeCacheMetricsPort}\n}\n`;
    nodeCache = await launchProcess({
      script: `${root}/packages/forwarder/dist/node-cache-main.js`,
      readyMsg: 'node cache ready',
      args: await loopbackNodeCacheArgs(block('cluster.local') + block('.')),
    });
  }, 60_000);
  afterAll(async () => {
    prometheus?.kill('SIGKILL');
    await nodeCache?.stop('SIGKILL');
    await sidecar?.stop('SIGKILL');
    await stack?.close();
  });

  it.each(['record-builder', 'forwarder', 'sidecar'] as const)(
    'promtool check metrics on the %s finds nothing but the kube-dns names kept on purpose',
    async (name) => {
      const text = await (await fetch(`http://127.0.0.1:${targets()[name]}/metrics`)).text();
      const run = await runCommand('promtool', ['check', 'metrics'], { input: text });
      const findings = `${run.stdout}${run.stderr}`
        .split('\n')
        .map((l) => l.trim())
        .filter(Boolean);
      const unexpected = findings.filter((f) => !DELIBERATE_FINDINGS[name].some((re) => re.test(f)));
      expect(unexpected).toEqual([]);
      // The kube-dns names are there to be flagged: a renamed counter would pass silently.
      if (name === 'sidecar') expect(findings.length).toBeGreaterThan(5);
    },
  );

  it('scrapes every target, and the key series carry what the queries did', async () => {
    const port = await freePort();
    const dir = mkdtempSync(join(tmpdir(), 'prom-'));
    // The labels the Prometheus operator gives the ServiceMonitors' targets (servicemonitor.yaml).
    const target = (port: number, labels: Record<string, string>) =>
      `      - targets: ['127.0.0.1:${port}']\n        labels: ${JSON.stringify({ namespace: 'kube-system', ...labels })}`;
    const pod = { pod: 'kube-dns-5b8c9d7f6-abcde' };
    const jobs = [
      '  - job_name: kube-dns\n    static_configs:',
      target(targets()['record-builder'], { ...pod, container: 'kubedns', endpoint: 'metrics-records' }),
      target(targets().forwarder, { ...pod, container: 'dnsmasq', endpoint: 'metrics-forwarder' }),
      target(targets().sidecar, { ...pod, container: 'sidecar', endpoint: 'metrics' }),
      '  - job_name: node-local-dns\n    static_configs:',
      target(nodeCacheMetricsPort, { pod: 'node-local-dns-q8z4m', container: 'node-cache', endpoint: 'metrics' }),
    ].join('\n');
    writeFileSync(
      join(dir, 'prometheus.yml'),
      `global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n${jobs}\n`,
    );
    prometheus = spawn(
      'prometheus',
      [
        `--config.file=${join(dir, 'prometheus.yml')}`,
        `--storage.tsdb.path=${join(dir, 'data')}`,
        `--web.listen-address=127.0.0.1:${port}`,
      ],
      { stdio: 'ignore' },
    );
    promUrl = `http://127.0.0.1:${port}`;
    await waitFor(async () => (await fetch(`${promUrl}/-/ready`).catch(() => undefined))?.status === 200, {
      what: 'Prometheus to be ready',
      timeoutMs: 30_000,
    });
    for (let i = 0; i < 20; i++) {
      await queryDns({ host: '127.0.0.1', port: stack.fwPort }, `n${i}.example.org`, QTYPE.A);
      await queryDns({ host: '127.0.0.1', port: nodeCachePort }, `kubernetes.default.svc.cluster.local`, QTYPE.A);
    }
    const up = await waitFor(
      async () => {
        const result = await instant('up');
        return result.length === 4 && result.every((r) => r.value === 1) && result;
      },
      { what: 'up == 1 for all four targets', timeoutMs: 30_000 },
    );
    expect(up.map((r) => `${r.metric.job}/${r.metric.container}`).sort()).toEqual([
      'kube-dns/dnsmasq',
      'kube-dns/kubedns',
      'kube-dns/sidecar',
      'node-local-dns/node-cache',
    ]);
    const requests = await waitFor(
      async () => {
        const [r] = await instant('sum(coredns_dns_requests_total{job="kube-dns"})');
        return r && r.value >= 20 && r.value;
      },
      { what: 'the forwarder’s requests counted', timeoutMs: 20_000 },
    );
    expect(requests).toBeGreaterThanOrEqual(20);
    const expectations: Array<[string, (v: number) => boolean]> = [
      ['sum(coredns_cache_misses_total)', (v) => v >= 20],
      ['sum(coredns_forward_requests_total)', (v) => v >= 20],
      ['clusterdns_recordbuilder_ready', (v) => v === 1],
      ['sum(skydns_skydns_dns_request_count_total)', (v) => v > 0],
      ['sum(kubedns_probe_kubedns_latency_ms_count)', (v) => v > 0],
      ['kubedns_dnsmasq_max_size', (v) => v === 1000],
      ['sum(coredns_dns_requests_total{job="node-local-dns"})', (v) => v >= 20],
    ];
    for (const [query, ok] of expectations)
      await waitFor(async () => (await instant(query)).some((r) => ok(r.value)), { what: query, timeoutMs: 20_000 });
  }, 90_000);

  it('runs every PromQL expression of the dashboard and the alert rules without an error', async () => {
    expect(promUrl).not.toBe('');
    const dashboard = JSON.parse(readFileSync(`${root}/manifests/extras/grafana-dashboard.json`, 'utf8'));
    const exprs: string[] = dashboard.panels.flatMap((p: { targets?: Array<{ expr: string }> }) =>
      (p.targets ?? []).map((t) => t.expr),
    );
    const rules = alertRules().map((r) => r.expr);
    expect(exprs.length).toBeGreaterThan(10);
    const failures: string[] = [];
    for (const expr of [...exprs, ...rules]) {
      const res = await fetch(`${promUrl}/api/v1/query?query=${encodeURIComponent(withVariables(expr))}`);
      const body = (await res.json()) as { status: string; error?: string };
      if (body.status !== 'success') failures.push(`${expr}: ${body.error}`);
    }
    expect(failures).toEqual([]);
    // A misspelt metric is no PromQL error, just an empty panel: every name must be one we export
    // (the memory alert's cAdvisor and kube-state-metrics series aside).
    const exported = new Set<string>();
    for (const port of [...Object.values(targets()), nodeCacheMetricsPort]) {
      const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      for (const line of text.split('\n')) if (line.startsWith('# TYPE ')) exported.add(line.split(' ')[2] as string);
    }
    const used = [...exprs, ...rules]
      .flatMap((e) => e.match(/\b(coredns|clusterdns|kubedns|skydns|process|nodejs)_[a-z0-9_]+/g) ?? [])
      .map((n) => n.replace(/_(bucket|count|sum)$/, ''));
    expect([...new Set(used)].filter((n) => !exported.has(n))).toEqual([]);
  });

  it('scopes every panel to its namespace and job: the node cache is never summed into the Pods', async () => {
    const dashboard = JSON.parse(readFileSync(`${root}/manifests/extras/grafana-dashboard.json`, 'utf8')) as {
      panels: Array<{ title: string; targets?: Array<{ expr: string }> }>;
    };
    const panel = (title: string) => dashboard.panels.find((p) => p.title === title)?.targets ?? [];
    // As deployed: the Pod's and the node cache's rows each show their own, and the resources
    // panel one line per container of both.
    const series = async (title: string, vars?: Record<string, string>) =>
      (await Promise.all(panel(title).map(async (t) => instant(withVariables(t.expr, vars))))).flat();
    const shown = await waitFor(
      async () => {
        const memory = await series('Resident memory (largest instance)');
        return memory.length === 4 && memory;
      },
      { what: 'the resources of all four containers', timeoutMs: 20_000 },
    );
    expect(shown.map((r) => r.metric.container).sort()).toEqual(['dnsmasq', 'kubedns', 'node-cache', 'sidecar']);
    // Rates need two scrapes of a series: until then a panel is empty, as in Grafana.
    for (const title of ['Queries per second, by type', 'Node cache queries per second, by rcode'])
      await waitFor(async () => (await series(title)).length > 0, { what: `data in ${title}`, timeoutMs: 20_000 });
    expect((await series('Node caches up')).map((r) => r.value)).toEqual([1]);
    // The Pod's request count is the forwarder's own, not the forwarder's and the node cache's.
    const fw = await (await fetch(`http://127.0.0.1:${targets().forwarder}/metrics`)).text();
    const own = [...fw.matchAll(/^coredns_dns_requests_total\{[^}]*\} (\S+)$/gm)].reduce((n, m) => n + Number(m[1]), 0);
    const scraped = await waitFor(
      async () => {
        const [pod] = await instant(
          withVariables('sum(coredns_dns_requests_total{namespace="$namespace", job="$job"})'),
        );
        const [all] = await instant('sum(coredns_dns_requests_total)');
        return pod && all && pod.value >= own && { pod: pod.value, all: all.value };
      },
      { what: 'the forwarder’s latest count scraped', timeoutMs: 20_000 },
    );
    expect(scraped.all).toBeGreaterThan(scraped.pod);
    // Pointed at a namespace or jobs that do not exist, every panel is empty: none reads unscoped.
    for (const vars of [{ namespace: 'elsewhere' }, { job: 'nowhere', nodecache_job: 'nowhere' }] as Array<
      Record<string, string>
    >) {
      const leaking: string[] = [];
      for (const p of dashboard.panels)
        for (const t of p.targets ?? [])
          if ((await instant(withVariables(t.expr, vars))).length > 0) leaking.push(`${p.title}: ${t.expr}`);
      expect(leaking, JSON.stringify(vars)).toEqual([]);
    }
  });
});

/** A dashboard expression as Grafana sends it: its variables at their defaults, or as given. */
function withVariables(expr: string, vars: Record<string, string> = {}): string {
  const values = { namespace: 'kube-system', job: 'kube-dns', nodecache_job: 'node-local-dns', ...vars };
  return expr
    .replaceAll('$__rate_interval', '1m')
    .replaceAll('$__interval', '15s')
    .replaceAll('$nodecache_job', values.nodecache_job)
    .replaceAll('$namespace', values.namespace)
    .replaceAll('$job', values.job);
}

/** An instant query against the test's Prometheus: each series' labels and value. */
async function instant(query: string): Promise<Array<{ metric: Record<string, string>; value: number }>> {
  const res = await fetch(`${promUrl}/api/v1/query?query=${encodeURIComponent(query)}`);
  const body = (await res.json()) as {
    data: { result: Array<{ metric: Record<string, string>; value: [number, string] }> };
  };
  return body.data.result.map((r) => ({ metric: r.metric, value: Number(r.value[1]) }));
}

/** The alert rules of the PrometheusRule in manifests/extras. */
function alertRules(): Array<{ alert: string; expr: string }> {
  const text = readFileSync(`${root}/manifests/extras/prometheusrule.yaml`, 'utf8');
  const doc = loadYaml(text) as { spec: { groups: Array<{ rules: Array<{ alert: string; expr: string }> }> } };
  return doc.spec.groups.flatMap((g) => g.rules);
}
