// biome-ignore-all lint/suspicious/noExplicitAny: the manifests are YAML read at run time; the schema test above types them.
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { forwarderFlags, nodeCacheFlags, planNodeLocal, toForwarderOptions } from '@cluster-dns/forwarder';
import { recordBuilderFlags, toRecordBuilderOptions, watchedResources } from '@cluster-dns/record-builder';
import { parseFlags, readCorefile } from '@cluster-dns/runtime';
import { sidecarFlags } from '@cluster-dns/sidecar';
import { argsOf, type Rendered, render, runCommand } from '@cluster-dns/testkit';
import { cidrContains } from '@cluster-dns/wire';
import { loadAllYaml } from '@kubernetes/client-node';
import { PrometheusRule } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule';
import { ServiceMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor';
import { DaemonSet } from 'kubernetes-models/apps/v1/DaemonSet';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { ClusterRole } from 'kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRole';
import { ClusterRoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRoleBinding';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Service } from 'kubernetes-models/v1/Service';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('..', import.meta.url));
type Obj = { apiVersion: string; kind: string; metadata: { name: string; namespace?: string }; [k: string]: unknown };

function load(dir: string): Obj[] {
  return readdirSync(`${root}/${dir}`)
    .filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml')
    .flatMap((f) => loadAllYaml(readFileSync(`${root}/${dir}/${f}`, 'utf8')) as Obj[]);
}
const base = load('manifests/base');
const extras = load('manifests/extras');
const find = (kind: string) => base.find((o) => o.kind === kind) as Obj;
type Container = {
  name: string;
  args: string[];
  ports: Array<{ containerPort: number; protocol: string; name: string }>;
  [k: string]: unknown;
};
const deployment = find('Deployment') as Obj & {
  spec: { template: { spec: { containers: Container[] } & Record<string, unknown> } };
};
const container = (name: string) =>
  deployment.spec.template.spec.containers.find((c) => c.name === name) as Container & Record<string, any>;

const MODELS: Record<string, new (data: any) => { validate(): void }> = {
  'v1/ServiceAccount': ServiceAccount,
  'v1/Service': Service,
  'v1/ConfigMap': ConfigMap,
  'apps/v1/Deployment': Deployment,
  'apps/v1/DaemonSet': DaemonSet,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'rbac.authorization.k8s.io/v1/ClusterRole': ClusterRole,
  'rbac.authorization.k8s.io/v1/ClusterRoleBinding': ClusterRoleBinding,
  'monitoring.coreos.com/v1/ServiceMonitor': ServiceMonitor,
  'monitoring.coreos.com/v1/PrometheusRule': PrometheusRule,
};

describe('manifests', () => {
  it.each(
    [...base, ...extras, ...load('manifests/node-local')].map((o) => [`${o.kind}/${o.metadata.name}`, o] as const),
  )('%s is valid against the Kubernetes schema', (_n, o) => {
    const Model = MODELS[`${o.apiVersion}/${o.kind}`];
    expect(Model, `a schema for ${o.apiVersion}/${o.kind}`).toBeDefined();
    expect(() => new (Model as NonNullable<typeof Model>)(o).validate()).not.toThrow();
  });

  it('lists every base manifest in kustomization.yaml', () => {
    const kustomization = loadAllYaml(readFileSync(`${root}/manifests/base/kustomization.yaml`, 'utf8'))[0] as {
      resources: string[];
    };
    const files = readdirSync(`${root}/manifests/base`).filter(
      (f) => f.endsWith('.yaml') && f !== 'kustomization.yaml',
    );
    expect([...kustomization.resources].sort()).toEqual(files.sort());
  });

  it.each([
    ['kubedns', 'record-builder'],
    ['dnsmasq', 'forwarder'],
    ['sidecar', 'sidecar'],
  ])('the %s container args are accepted by the %s binary', async (name, pkg) => {
    const out = await runCommand(process.execPath, [
      `${root}/packages/${pkg}/dist/main.js`,
      ...container(name).args,
      '--help',
    ]);
    expect(out.stderr).toBe('');
    expect(out.status).toBe(0);
  });

  it('points every port and probe at what the binaries listen on', () => {
    const rb = parseFlags(recordBuilderFlags, container('kubedns').args).values;
    const fw = parseFlags(forwarderFlags, container('dnsmasq').args).values;
    const sc = parseFlags(sidecarFlags, container('sidecar').args).values;
    const ports = (c: string) =>
      container(c).ports.map((p: { containerPort: number; protocol: string }) => `${p.containerPort}/${p.protocol}`);
    expect(ports('kubedns')).toEqual([`${rb['dns-port']}/UDP`, `${rb['dns-port']}/TCP`, `${rb['metrics-port']}/TCP`]);
    expect(ports('dnsmasq')).toEqual([`${fw.port}/UDP`, `${fw.port}/TCP`, `${fw['metrics-port']}/TCP`]);
    // The record-builder pushes its changes to this Pod's forwarder, on the port it listens on.
    expect(rb.notify).toEqual([{ host: '127.0.0.1', port: fw.port }]);
    expect(ports('sidecar')).toEqual([`${sc['prometheus-port']}/TCP`]);
    expect(container('kubedns').readinessProbe.httpGet).toMatchObject({ path: '/readiness', port: rb['healthz-port'] });
    const labels = sc.probe.map((p) => p.label);
    for (const [c, label] of [
      ['kubedns', 'kubedns'],
      ['dnsmasq', 'dnsmasq'],
    ]) {
      expect(container(c as string).livenessProbe.httpGet).toEqual({
        path: `/healthcheck/${label}`,
        port: sc['prometheus-port'],
        scheme: 'HTTP',
      });
      expect(labels).toContain(label);
    }
    expect(container('sidecar').livenessProbe.httpGet).toMatchObject({
      path: sc['prometheus-path'],
      port: sc['prometheus-port'],
    });
    // The sidecar probes, and the forwarder forwards, to the ports the others listen on.
    expect(sc.probe.map((p) => p.server.port).sort()).toEqual([fw.port, rb['dns-port']].sort());
    expect(fw.server.filter((r) => r.domains.length).every((r) => r.servers[0]?.port === rb['dns-port'])).toBe(true);
    const zone = toRecordBuilderOptions(rb).zone;
    expect(fw.server.some((r) => r.domains.includes(zone))).toBe(true);
    const service = find('Service') as Obj & {
      spec: { ports: Array<{ port: number; protocol: string; targetPort: number }> };
    };
    expect(service.spec.ports.slice(0, 2).map((p) => `${p.targetPort}/${p.protocol}`)).toEqual([
      `${fw.port}/UDP`,
      `${fw.port}/TCP`,
    ]);
  });

  it('grants list and watch on exactly what the record-builder watches with its args, and leaves replicas to the autoscaler', () => {
    expect((deployment.spec as Record<string, unknown>).replicas).toBeUndefined();
    const role = find('ClusterRole') as Obj & {
      rules: Array<{ apiGroups: string[]; resources: string[]; verbs: string[] }>;
    };
    const granted = role.rules.flatMap((r) => r.resources);
    for (const r of role.rules) expect(r.verbs.sort()).toEqual(['list', 'watch']);
    const rb = toRecordBuilderOptions(parseFlags(recordBuilderFlags, container('kubedns').args).values);
    // Exactly what these args watch: a flag that watches more brings its rule with it (the
    // node-local push overlay's Pods).
    expect([...new Set(granted)].sort()).toEqual([...new Set(watchedResources(rb))].sort());
    const binding = find('ClusterRoleBinding') as Obj & { subjects: Array<{ name: string; namespace: string }> };
    expect(binding.subjects).toEqual([{ kind: 'ServiceAccount', name: 'kube-dns', namespace: 'kube-system' }]);
  });

  it('runs every container non-root with a read-only root and no capabilities but NET_BIND_SERVICE on the forwarder', () => {
    const pod = deployment.spec.template.spec as Record<string, any>;
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 1001 });
    expect(pod.priorityClassName).toBe('system-cluster-critical');
    expect(pod.dnsPolicy).toBe('Default');
    expect(pod.tolerations).toContainEqual({ key: 'CriticalAddonsOnly', operator: 'Exists' });
    for (const c of pod.containers) {
      expect(c.securityContext).toMatchObject({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true });
      expect(c.securityContext.capabilities.drop).toEqual(['ALL']);
      expect(c.securityContext.capabilities.add ?? []).toEqual(c.name === 'dnsmasq' ? ['NET_BIND_SERVICE'] : []);
      expect(c.resources.requests.memory).toBeDefined();
      // The V8 heap cap must leave room under the memory limit (Mi) for the rest of the process.
      const limitMi = Number(/^(\d+)Mi$/.exec(c.resources.limits.memory)?.[1]);
      const heapMi = Number(
        /--max-old-space-size=(\d+)/.exec(
          c.env?.find((e: { name: string }) => e.name === 'NODE_OPTIONS')?.value ?? '',
        )?.[1],
      );
      expect(heapMi).toBeGreaterThan(0);
      expect(heapMi).toBeLessThanOrEqual(limitMi * 0.9);
    }
    expect((deployment.spec as Record<string, any>).strategy.rollingUpdate.maxUnavailable).toBe(0);
    const rbLameduckMs = parseFlags(recordBuilderFlags, container('kubedns').args).values.lameduck;
    expect(pod.terminationGracePeriodSeconds * 1000).toBeGreaterThan(rbLameduckMs + 10_000);
  });
});

describe('manifests/node-local: NodeLocal DNSCache with the node-cache image', () => {
  const objects = load('manifests/node-local');
  const daemonSet = objects.find((o) => o.kind === 'DaemonSet') as Obj & Record<string, any>;
  const pod = daemonSet.spec.template.spec;
  const cache = pod.containers[0] as Container & Record<string, any>;
  const corefile = (objects.find((o) => o.kind === 'ConfigMap') as Obj & { data: { Corefile: string } }).data.Corefile;

  it('runs as nodelocaldns.yaml does: every node, host network, critical, NET_ADMIN, the xtables lock', () => {
    expect(daemonSet.spec.updateStrategy.rollingUpdate.maxUnavailable).toBe('10%');
    expect(pod).toMatchObject({ hostNetwork: true, dnsPolicy: 'Default', priorityClassName: 'system-node-critical' });
    expect(pod.tolerations).toContainEqual({ effect: 'NoSchedule', operator: 'Exists' });
    expect(pod.tolerations).toContainEqual({ effect: 'NoExecute', operator: 'Exists' });
    expect(cache.securityContext.capabilities.add).toEqual(['NET_ADMIN']);
    expect(pod.volumes).toContainEqual({
      name: 'xtables-lock',
      hostPath: { path: '/run/xtables.lock', type: 'FileOrCreate' },
    });
    expect(cache.volumeMounts).toContainEqual({
      name: 'xtables-lock',
      mountPath: '/run/xtables.lock',
      readOnly: false,
    });
    // The ConfigMap's Corefile lands where node-cache reads its template.
    const values = parseFlags(nodeCacheFlags, cache.args).values;
    const mount = cache.volumeMounts.find((m: { name: string }) => m.name === 'config-volume');
    const item = pod.volumes.find((v: { name: string }) => v.name === 'config-volume').configMap.items[0];
    expect(`${mount.mountPath}/${item.path}`).toBe(values.basecorefile);
    expect(values.upstreamsvc).toBe('kube-dns-upstream');
    expect(objects.some((o) => o.kind === 'Service' && o.metadata.name === 'kube-dns-upstream')).toBe(true);
  });

  it('the node-cache args are accepted by the node-cache binary', async () => {
    const out = await runCommand(process.execPath, [
      `${root}/packages/forwarder/dist/node-cache-main.js`,
      ...cache.args,
      '--help',
    ]);
    expect(out.stderr).toBe('');
    expect(out.status).toBe(0);
  });

  it('points the ports and the liveness probe at what its Corefile binds, and the kube-dns IP at the Service', () => {
    const plan = planNodeLocal(
      readCorefile(
        corefile
          .replaceAll('__PILLAR__CLUSTER__DNS__', '10.96.0.11')
          .replaceAll('__PILLAR__UPSTREAM__SERVERS__', '/etc/resolv.conf'),
        { mode: 'node-local' },
      ),
    );
    const values = parseFlags(nodeCacheFlags, cache.args).values;
    expect(plan.listenAddresses).toEqual(values.localip.split(','));
    const ports = cache.ports.map(
      (p: { containerPort: number; protocol: string }) => `${p.containerPort}/${p.protocol}`,
    );
    expect(ports).toEqual([`${plan.port}/UDP`, `${plan.port}/TCP`, `${plan.metrics?.port}/TCP`]);
    expect(cache.livenessProbe.httpGet).toEqual({ host: plan.health?.host, path: '/health', port: plan.health?.port });
    expect(plan.health?.port).toBe(values['health-port']);
    const kubeDns = find('Service') as Obj & { spec: { clusterIP: string } };
    expect(values.localip.split(',')).toContain(kubeDns.spec.clusterIP);
    const metrics = objects.find((o) => o.kind === 'Service' && o.metadata.name === 'node-local-dns') as Obj &
      Record<string, any>;
    expect(metrics.spec.clusterIP).toBe('None');
    expect(metrics.spec.ports[0].port).toBe(plan.metrics?.port);
  });

  it('lists every manifest in its kustomization.yaml', () => {
    const kustomization = loadAllYaml(readFileSync(`${root}/manifests/node-local/kustomization.yaml`, 'utf8'))[0] as {
      resources: string[];
    };
    const files = readdirSync(`${root}/manifests/node-local`).filter(
      (f) => f.endsWith('.yaml') && f !== 'kustomization.yaml',
    );
    expect([...kustomization.resources].sort()).toEqual(files.sort());
  });
});

describe('components/autopath: server-side search switched on in one step', () => {
  const COMPONENT = 'manifests/components/autopath';
  // The downward API's $(POD_IP) as the kubelet fills it.
  const rbOf = (objects: Rendered) =>
    toRecordBuilderOptions(
      parseFlags(
        recordBuilderFlags,
        argsOf(objects, 'Deployment', 'kubedns').map((a) => a.replace('$(POD_IP)', '10.244.0.5')),
      ).values,
    );
  const fwOf = (objects: Rendered) =>
    toForwarderOptions(parseFlags(forwarderFlags, argsOf(objects, 'Deployment', 'dnsmasq')).values);
  const granted = (objects: Rendered) =>
    [...new Set(objects.find((o) => o.kind === 'ClusterRole')?.rules?.flatMap((r) => r.resources))].sort();

  it('with the Pod and the node caches: pods watched and granted, the walk on both layers, the nodes trusted', async () => {
    const plain = await render(['manifests/base', 'manifests/node-local']);
    const objects = await render(['manifests/base', 'manifests/node-local'], [COMPONENT], '192.168.0.0/16');
    expect(rbOf(plain).pods).toBe('insecure');
    const rb = rbOf(objects);
    expect(rb.pods).toBe('verified');
    // The ClusterRole grants exactly what the args now watch: Pods among them.
    expect(granted(objects)).toEqual([...new Set(watchedResources(rb))].sort());
    expect(granted(objects)).toContain('pods');
    const fw = fwOf(objects);
    expect(fw.autopath?.zone).toBe('cluster.local.');
    // The one setting, given once, reaches the flag: the nodes the node caches ask from.
    expect(argsOf(objects, 'Deployment', 'dnsmasq')).toContain('--trust-client-address-from=192.168.0.0/16');
    expect(fw.isolation.trustClientAddressFrom.some((c) => cidrContains(c, '192.168.7.1'))).toBe(true);
    expect(fw.isolation.trustClientAddressFrom.some((c) => cidrContains(c, '10.0.0.1'))).toBe(false);
    const cache = parseFlags(nodeCacheFlags, argsOf(objects, 'DaemonSet', 'node-cache')).values;
    expect(cache.autopath).toBe('cluster.local');
    // The settings are read at build time only: nothing of them is applied to the cluster.
    expect(objects.some((o) => o.metadata.name === 'autopath-settings')).toBe(false);
  });

  it('each layer alone: the Pod without node caches, the node caches without the Pod, beside node-local push', async () => {
    const pod = await render(['manifests/base'], [COMPONENT], '10.0.0.0/8');
    expect(rbOf(pod).pods).toBe('verified');
    expect(argsOf(pod, 'Deployment', 'dnsmasq')).toContain('--trust-client-address-from=10.0.0.0/8');
    const nodes = await render(['manifests/node-local'], [COMPONENT], '10.0.0.0/8');
    expect(argsOf(nodes, 'DaemonSet', 'node-cache')).toContain('-autopath=cluster.local');
    const push = await render(
      ['manifests/overlays/node-local-push', 'manifests/node-local'],
      [COMPONENT],
      '10.0.0.0/8',
    );
    // Without the setting, kustomize stops and names it.
    await expect(render(['manifests/base'], [COMPONENT])).rejects.toThrow(/autopath-settings/);
    const rb = rbOf(push);
    expect(rb.pods).toBe('verified');
    expect(rb.nodeCacheDiscovery).toBeDefined();
    expect(granted(push)).toEqual(
      [...new Set(watchedResources(rb).map((r) => (r === 'node-caches' ? 'pods' : r)))].sort(),
    );
  });

  it('in CoreDNS mode leaves the walk to the Corefile and adds only the trust of the node caches', async () => {
    const objects = await render(['manifests/overlays/coredns'], [COMPONENT], '172.16.0.0/12');
    const rbArgs = argsOf(objects, 'Deployment', 'kubedns');
    expect(rbArgs).not.toContain('--pods=verified');
    const fwArgs = argsOf(objects, 'Deployment', 'dnsmasq');
    expect(fwArgs).toEqual(['--trust-client-address-from=172.16.0.0/12', '-conf', '/etc/coredns/Corefile']);
    expect(fwArgs.some((a) => a.startsWith('--autopath'))).toBe(false);
    expect(parseFlags(forwarderFlags, fwArgs).values.corefile).toBe('/etc/coredns/Corefile');
  });
});
