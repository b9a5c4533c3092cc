import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadAllYaml } from '@kubernetes/client-node';
import { runCommand } from './command.js';

// The repo's manifests as kubectl kustomize renders them, for the tests and the bench (case 12
// runs the autopath component's rendered flags). From packages/testkit/dist: the repo's root.
const root = fileURLToPath(new URL('../../..', import.meta.url));

export type Rendered = Array<{
  kind: string;
  metadata: { name: string; annotations?: Record<string, string> };
  spec?: { template: { spec: { containers: Array<{ name: string; args?: string[] }> } } };
  rules?: Array<{ apiGroups: string[]; resources: string[]; verbs: string[] }>;
}>;

/**
 * What `kubectl kustomize` makes of these folders of the repo (`manifests/base`, …) with these
 * components, as an operator's own kustomization would list them; `nodes` gives the autopath
 * component its one setting, as an operator does: its settings.yaml copied, set, and listed.
 */
export async function render(resources: string[], components: string[] = [], nodes?: string): Promise<Rendered> {
  const dir = mkdtempSync(join(tmpdir(), 'kustomize-'));
  const at = (path: string) => relative(dir, join(root, path));
  const settings: string[] = [];
  if (nodes !== undefined) {
    const example = readFileSync(join(root, 'manifests/components/autopath/settings.yaml'), 'utf8');
    writeFileSync(join(dir, 'autopath-settings.yaml'), example.replace(/^ {2}nodes: .*$/m, `  nodes: "${nodes}"`));
    settings.push('autopath-settings.yaml');
  }
  writeFileSync(
    join(dir, 'kustomization.yaml'),
    [
      'apiVersion: kustomize.config.k8s.io/v1beta1',
      'kind: Kustomization',
      `resources: [${[...resources.map(at), ...settings].join(', ')}]`,
      ...(components.length ? [`components: [${components.map(at).join(', ')}]`] : []),
      '',
    ].join('\n'),
  );
  const run = await runCommand('kubectl', ['kustomize', dir]);
  if (run.status !== 0) throw new Error(`kubectl kustomize ${resources.join(' ')}: ${run.stderr}`);
  return loadAllYaml(run.stdout) as Rendered;
}

/** The args of one container of a rendered workload. */
export function argsOf(objects: Rendered, kind: string, container: string): string[] {
  const workload = objects.find((o) => o.kind === kind);
  return workload?.spec?.template.spec.containers.find((c) => c.name === container)?.args ?? [];
}

/**
 * The args components/autopath adds to each layer (the Pod's record-builder and forwarder, the
 * node cache), rendered with the nodes' addresses given: what a test runs to run the component.
 */
export async function autopathArgs(nodes: string) {
  const layers = ['manifests/base', 'manifests/node-local'];
  const [plain, withIt] = await Promise.all([render(layers), render(layers, ['manifests/components/autopath'], nodes)]);
  const added = (kind: string, container: string) =>
    argsOf(withIt, kind, container).filter((a) => !argsOf(plain, kind, container).includes(a));
  return {
    kubedns: added('Deployment', 'kubedns'),
    dnsmasq: added('Deployment', 'dnsmasq'),
    nodeCache: added('DaemonSet', 'node-cache'),
  };
}
