import { copyFileSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { forwarderFlags, toForwarderOptions } from '@cluster-dns/forwarder';
import { recordBuilderFlags, toRecordBuilderOptions, watchedResources } from '@cluster-dns/record-builder';
import { parseFlags, readCorefile } from '@cluster-dns/runtime';
import { hasCommand, runCommand } from '@cluster-dns/testkit';
import type { Fqdn } from '@cluster-dns/wire';
import { dumpYaml, loadAllYaml, loadYaml } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';

// The PrometheusRule and the kustomization as an operator's tools take them: promtool checks and
// unit-tests every alert, kubectl renders the manifests.
const root = fileURLToPath(new URL('..', import.meta.url));
const promtool = hasCommand('promtool');
const kubectl = hasCommand('kubectl');
if (!promtool)
  console.warn('skipping the alert rule tests: promtool is not installed; run: apt-get install -y prometheus');
if (!kubectl) console.warn('skipping the kustomize test: kubectl is not installed');

type Rule = { alert: string; expr: string; for?: string };
const ruleDoc = loadYaml(readFileSync(`${root}/manifests/extras/prometheusrule.yaml`, 'utf8')) as {
  spec: { groups: Array<{ name: string; rules: Rule[] }> };
};
const testFile = `${root}/manifests/extras/tests/prometheusrule.test.yaml`;

/** The rules as promtool reads them, beside a copy of the unit tests. */
function rulesDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'rules-'));
  writeFileSync(join(dir, 'rules.yaml'), dumpYaml({ groups: ruleDoc.spec.groups }));
  copyFileSync(testFile, join(dir, 'prometheusrule.test.yaml'));
  return dir;
}

describe('alert rules', () => {
  it('has a unit test for every alert', () => {
    const tests = loadYaml(readFileSync(testFile, 'utf8')) as {
      tests: Array<{ alert_rule_test: Array<{ alertname: string; exp_alerts: unknown[] }> }>;
    };
    const firing = new Set(
      tests.tests.flatMap((t) => t.alert_rule_test.filter((a) => a.exp_alerts.length > 0).map((a) => a.alertname)),
    );
    const alerts = ruleDoc.spec.groups.flatMap((g) => g.rules.map((r) => r.alert));
    expect(alerts.length).toBeGreaterThanOrEqual(8);
    expect(alerts.filter((a) => !firing.has(a))).toEqual([]);
  });

  it.skipIf(!promtool)('passes promtool check rules', async () => {
    const dir = rulesDir();
    const run = await runCommand('promtool', ['check', 'rules', join(dir, 'rules.yaml')]);
    expect(`${run.stdout}${run.stderr}`).toContain('SUCCESS');
    expect(run.status).toBe(0);
  });

  it.skipIf(!promtool)(
    'passes promtool test rules: each alert fires on its series and not on healthy ones',
    async () => {
      const dir = rulesDir();
      const run = await runCommand('promtool', ['test', 'rules', join(dir, 'prometheusrule.test.yaml')]);
      expect(run.status, `${run.stdout}${run.stderr}`).toBe(0);
    },
  );

  it.skipIf(!promtool)('fails promtool test rules when a threshold is broken (the tests can fail)', async () => {
    const dir = rulesDir();
    const broken = readFileSync(join(dir, 'rules.yaml'), 'utf8').replace('> 0.01', '> 0.5');
    writeFileSync(join(dir, 'rules.yaml'), broken);
    const run = await runCommand('promtool', ['test', 'rules', join(dir, 'prometheusrule.test.yaml')]);
    expect(run.status).not.toBe(0);
    expect(`${run.stdout}${run.stderr}`).toContain('ClusterDNSServfailRatioHigh');
  });
});

/** Every selector of a metric of ours (or `up`) in an expression: name and what is between its braces. */
function selectors(expr: string): Array<{ name: string; labels: string }> {
  const out: Array<{ name: string; labels: string }> = [];
  for (const m of expr.matchAll(
    /\b((?:coredns|clusterdns|kubedns|skydns|process|nodejs)_[a-z0-9_]+|up)\b(\{[^}]*\})?/g,
  ))
    out.push({ name: m[1] as string, labels: m[2] ?? '' });
  return out;
}

describe('scoped to our jobs', () => {
  // The jobs the ServiceMonitors give (their jobLabel, k8s-app): what the rules and the dashboard select.
  const monitors = loadAllYaml(readFileSync(`${root}/manifests/extras/servicemonitor.yaml`, 'utf8')) as Array<{
    metadata: { name: string };
    spec: { jobLabel: string; selector: { matchLabels: Record<string, string> } };
  }>;
  const jobs = monitors.map((m) => m.spec.selector.matchLabels[m.spec.jobLabel]);

  it('scrapes the Pods as job kube-dns and the node caches as job node-local-dns', () => {
    expect(jobs).toEqual(['kube-dns', 'node-local-dns']);
  });

  it('names its job in every selector of every alert (a CoreDNS scraped beside us is never counted)', () => {
    const unscoped = ruleDoc.spec.groups
      .flatMap((g) => g.rules)
      .flatMap((r) => selectors(r.expr).map((s) => ({ ...s, alert: r.alert })))
      .filter((s) => !/job=~?"(kube-dns|node-local-dns)(\|(kube-dns|node-local-dns))?"/.test(s.labels));
    expect(unscoped).toEqual([]);
  });

  it('names $namespace and a job variable in every selector of the dashboard, the node caches’ row its own', () => {
    const dashboard = JSON.parse(readFileSync(`${root}/manifests/extras/grafana-dashboard.json`, 'utf8')) as {
      templating: { list: Array<{ name: string; current?: { value?: string } }> };
      panels: Array<{ type: string; title: string; targets?: Array<{ expr: string }> }>;
    };
    const defaults = Object.fromEntries(dashboard.templating.list.map((v) => [v.name, v.current?.value]));
    expect(defaults).toMatchObject({ namespace: 'kube-system', job: jobs[0], nodecache_job: jobs[1] });
    let row = '';
    const wrong: string[] = [];
    for (const panel of dashboard.panels) {
      if (panel.type === 'row') row = panel.title;
      for (const { expr } of panel.targets ?? [])
        for (const s of selectors(expr)) {
          const job = /job=~?"([^"]*)"/.exec(s.labels)?.[1];
          const expected =
            row === 'Node caches'
              ? '$nodecache_job'
              : row === 'Resources' || s.name.includes('programming')
                ? '$job|$nodecache_job'
                : '$job';
          if (!s.labels.includes('namespace="$namespace"') || job !== expected)
            wrong.push(`${panel.title}: ${s.name}${s.labels}`);
        }
    }
    expect(wrong).toEqual([]);
    expect(dashboard.panels.filter((p) => p.type === 'row').map((p) => p.title)).toContain('Node caches');
  });
});

describe.skipIf(!kubectl)('kustomize', () => {
  it('kubectl kustomize manifests renders every object of the kustomization, cleanly', async () => {
    const run = await runCommand('kubectl', ['kustomize', `${root}/manifests`]);
    expect(run.status, run.stderr).toBe(0);
    const kinds = (loadAllYaml(run.stdout) as Array<{ kind: string; metadata: { namespace?: string } }>).map(
      (o) => o.kind,
    );
    expect(kinds.sort()).toEqual([
      'ClusterRole',
      'ClusterRoleBinding',
      'Deployment',
      'PodDisruptionBudget',
      'Service',
      'ServiceAccount',
    ]);
    expect(run.stderr).toBe('');
  });

  it('kubectl kustomize manifests/node-local renders the DaemonSet, its Services and its Corefile', async () => {
    const run = await runCommand('kubectl', ['kustomize', `${root}/manifests/node-local`]);
    expect(run.status, run.stderr).toBe(0);
    const objects = loadAllYaml(run.stdout) as Array<{ kind: string; metadata: { name: string; namespace?: string } }>;
    expect(objects.map((o) => `${o.kind}/${o.metadata.name}`).sort()).toEqual([
      'ConfigMap/node-local-dns',
      'DaemonSet/node-local-dns',
      'Service/kube-dns-upstream',
      'Service/node-local-dns',
      'ServiceAccount/node-local-dns',
    ]);
    expect(objects.every((o) => o.metadata.namespace === 'kube-system')).toBe(true);
    expect(run.stderr).toBe('');
  });

  it('the node-local handover overlay surges one Pod per node and declares no host ports', async () => {
    const run = await runCommand('kubectl', ['kustomize', `${root}/manifests/overlays/node-local-handover`]);
    expect(run.status, run.stderr).toBe(0);
    type DaemonSet = {
      kind: string;
      spec: {
        updateStrategy: { rollingUpdate: unknown };
        template: { spec: { hostNetwork: boolean; containers: Array<{ ports?: unknown }> } };
      };
    };
    const daemonSet = (loadAllYaml(run.stdout) as DaemonSet[]).find((o) => o.kind === 'DaemonSet');
    expect(daemonSet?.spec.updateStrategy.rollingUpdate).toEqual({ maxSurge: 1, maxUnavailable: 0 });
    expect(daemonSet?.spec.template.spec.containers[0]?.ports).toBeUndefined();
    expect(daemonSet?.spec.template.spec.hostNetwork).toBe(true);
  });

  it('the cluster-ip overlay renders the Service at the other address', async () => {
    const run = await runCommand('kubectl', ['kustomize', `${root}/manifests/overlays/cluster-ip`]);
    expect(run.status, run.stderr).toBe(0);
    const objects = loadAllYaml(run.stdout) as Array<{ kind: string; spec?: { clusterIP?: string } }>;
    expect(objects.find((o) => o.kind === 'Service')?.spec?.clusterIP).toBe('10.0.0.10');
  });

  it('the coredns overlay renders only the coredns Deployment (and its disruption budget), in Corefile mode on CoreDNS’s ports and probes', async () => {
    const run = await runCommand('kubectl', ['kustomize', `${root}/manifests/overlays/coredns`]);
    expect(run.status, run.stderr).toBe(0);
    type Container = {
      name: string;
      args: string[];
      ports: Array<{ containerPort: number; protocol: string }>;
      readinessProbe?: { httpGet: { path: string; port: number } };
      livenessProbe?: { httpGet: { path: string; port: number } };
      volumeMounts: Array<{ name: string; mountPath: string }>;
    };
    type Deployment = {
      kind: string;
      metadata: { name: string };
      spec: {
        selector: { matchLabels: Record<string, string> };
        template: {
          spec: {
            serviceAccountName: string;
            volumes: Array<{ name: string; configMap: { name: string } }>;
            containers: Container[];
          };
        };
      };
    };
    const objects = loadAllYaml(run.stdout) as Deployment[];
    // kubeadm's Service, ConfigMap, ServiceAccount and RBAC stay: nothing of ours replaces them.
    expect(objects.map((o) => `${o.kind}/${o.metadata.name}`).sort()).toEqual([
      'Deployment/coredns',
      'PodDisruptionBudget/coredns',
    ]);
    const deployment = objects.find((o) => o.kind === 'Deployment') as Deployment;
    // kubeadm's Deployment selects k8s-app=kube-dns (immutable), as its Service does.
    expect(deployment.spec.selector.matchLabels).toEqual({ 'k8s-app': 'kube-dns' });
    const pod = deployment.spec.template.spec;
    expect(pod.serviceAccountName).toBe('coredns');
    expect(pod.volumes).toEqual([
      { name: 'config-volume', configMap: { name: 'coredns', items: [{ key: 'Corefile', path: 'Corefile' }] } },
    ]);
    const [kubedns, dnsmasq] = pod.containers as [Container, Container];
    // Each reads the ConfigMap's Corefile where it is mounted, and each binary takes its args.
    for (const [container, flags] of [
      [kubedns, recordBuilderFlags],
      [dnsmasq, forwarderFlags],
    ] as const) {
      const mount = container.volumeMounts.find((m) => m.name === 'config-volume')?.mountPath;
      expect(parseFlags(flags as typeof forwarderFlags, container.args).values.corefile).toBe(`${mount}/Corefile`);
    }
    // The probes and ports are kubeadm's Corefile's: /ready on its ready, /health on its health, 53 and 9153.
    const corefile = readCorefile(readFileSync(`${root}/test/fixtures/kubeadm.Corefile`, 'utf8'), { mode: 'pod' });
    const block = corefile[0] as (typeof corefile)[number];
    expect(kubedns.readinessProbe?.httpGet).toMatchObject({ path: '/ready', port: block.ready?.port });
    expect(dnsmasq.livenessProbe?.httpGet).toMatchObject({ path: '/health', port: block.health?.address.port });
    expect(dnsmasq.ports.map((p) => `${p.containerPort}/${p.protocol}`)).toEqual(
      expect.arrayContaining([
        `${block.keys[0]?.port}/UDP`,
        `${block.keys[0]?.port}/TCP`,
        `${block.prometheus?.port}/TCP`,
      ]),
    );
    // The record-builder answers the forwarder alone, and pushes its changes to it.
    const rb = toRecordBuilderOptions(parseFlags(recordBuilderFlags, kubedns.args).values);
    expect([rb.dnsHost, rb.notify]).toEqual(['127.0.0.1', [{ host: '127.0.0.1', port: block.keys[0]?.port }]]);
  });

  it('the node-local push overlay: the record-builder finds the DaemonSet’s pods by their own label, knows its pod IP, and the forwarder relays transfers', async () => {
    const run = await runCommand('kubectl', ['kustomize', `${root}/manifests/overlays/node-local-push`]);
    expect(run.status, run.stderr).toBe(0);
    type Container = {
      name: string;
      args: string[];
      env?: Array<{ name: string; valueFrom?: { fieldRef?: { fieldPath: string } } }>;
    };
    const deployment = (
      loadAllYaml(run.stdout) as Array<{ kind: string; spec: { template: { spec: { containers: Container[] } } } }>
    ).find((o) => o.kind === 'Deployment');
    const containers = deployment?.spec.template.spec.containers ?? [];
    const kubedns = containers.find((c) => c.name === 'kubedns') as Container;
    // The downward API's pod IP, as the kubelet expands $(POD_IP) in args.
    expect(kubedns.env?.find((e) => e.name === 'POD_IP')?.valueFrom?.fieldRef?.fieldPath).toBe('status.podIP');
    const args = kubedns.args.map((a) => a.replace('$(POD_IP)', '10.244.0.5'));
    const options = toRecordBuilderOptions(parseFlags(recordBuilderFlags, args).values);
    expect(options.podIp).toBe('10.244.0.5');
    // The selector picks the node-local DaemonSet's pods (manifests/node-local), by their labels.
    const daemonSet = (
      loadAllYaml(readFileSync(`${root}/manifests/node-local/daemonset.yaml`, 'utf8')) as Array<{
        kind: string;
        spec: { template: { metadata: { labels: Record<string, string> } } };
      }>
    ).find((o) => o.kind === 'DaemonSet');
    const [key, value] = (options.nodeCacheDiscovery?.labelSelector ?? '').split('=');
    expect(daemonSet?.spec.template.metadata.labels[key as string]).toBe(value);
    expect(options.nodeCacheDiscovery?.namespace).toBe('kube-system');
    const dnsmasq = containers.find((c) => c.name === 'dnsmasq') as Container;
    expect(toForwarderOptions(parseFlags(forwarderFlags, dnsmasq.args).values).transferRelayFrom.length).toBe(1);
    // --node-cache-selector watches pods: the overlay grants them, and the base alone does not.
    const role = (loadAllYaml(run.stdout) as Array<{ kind: string; rules: Array<{ resources: string[] }> }>).find(
      (o) => o.kind === 'ClusterRole',
    );
    const granted = role?.rules.flatMap((r) => r.resources) ?? [];
    expect([...new Set(granted)].sort()).toEqual(
      [...new Set(watchedResources(options).map((r) => (r === 'node-caches' ? 'pods' : r)))].sort(),
    );
  });

  it('the multicluster overlay: the record-builder serves clusterset.local, the forwarder routes it there, ServiceImports are granted', async () => {
    const run = await runCommand('kubectl', ['kustomize', `${root}/manifests/overlays/multicluster`]);
    expect(run.status, run.stderr).toBe(0);
    type Container = { name: string; args: string[] };
    const objects = loadAllYaml(run.stdout) as Array<{
      kind: string;
      spec: { template: { spec: { containers: Container[] } } };
      rules: Array<{ apiGroups: string[]; resources: string[] }>;
    }>;
    const containers = objects.find((o) => o.kind === 'Deployment')?.spec.template.spec.containers ?? [];
    const arg = (name: string) => (containers.find((c) => c.name === name) as Container).args;
    const rb = toRecordBuilderOptions(parseFlags(recordBuilderFlags, arg('kubedns')).values);
    expect(rb.multiclusterZone).toBe('clusterset.local.');
    const fw = parseFlags(forwarderFlags, arg('dnsmasq')).values;
    expect(fw.server.find((r) => r.domains.includes(rb.multiclusterZone as Fqdn))?.servers[0]).toMatchObject({
      host: '127.0.0.1',
      port: rb.dnsPort,
    });
    const rules = objects.find((o) => o.kind === 'ClusterRole')?.rules ?? [];
    expect([...new Set(rules.flatMap((r) => r.resources))].sort()).toEqual([...new Set(watchedResources(rb))].sort());
    expect(rules.find((r) => r.resources.includes('serviceimports'))?.apiGroups).toEqual(['multicluster.x-k8s.io']);
  });
});
