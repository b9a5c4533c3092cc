import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { WORKERS_WITHOUT_QUOTA } from '@cluster-dns/forwarder';
import { loadAllYaml } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
// @ts-expect-error: the bench is plain JavaScript.
import { memoryFor, NODE_CACHE_DEFAULT_WORKERS, sizingRule } from '../bench/sizing.mjs';

// One sizing rule: derived from a bench run by bench/sizing.mjs, kept in bench/sizing.json,
// quoted by the operator's guide and met by the manifests' requests and limits.

const root = fileURLToPath(new URL('..', import.meta.url));
const sizing = JSON.parse(readFileSync(`${root}/bench/sizing.json`, 'utf8'));
interface Rule {
  baseMiB: number;
  perTenThousandEndpointsMiB: number;
  churnFactor: number;
  /** The node cache's, from case 11: RSS with 10,000 answers at the default workers, and per further worker. */
  nodeCache: { workers: number; rssMiB: number; anonMiB: number; perWorkerMiB: number };
}
const rule = sizing as Rule;
const peak = (endpoints: number) => (memoryFor(rule, endpoints) as number) * rule.churnFactor;

describe('the sizing rule', () => {
  it('is what the bench run it names derives', () => {
    const run = JSON.parse(readFileSync(`${root}/bench/${sizing.from}`, 'utf8'));
    const { from: _from, machine: _machine, ...derived } = sizing;
    expect(sizingRule(run.rows)).toEqual(derived);
  });

  it('is the one the operator’s guide quotes, with its table', () => {
    const guide = readFileSync(`${root}/docs/operator-guide.md`, 'utf8');
    const section = guide.slice(guide.indexOf('## Sizing'), guide.indexOf('## Upgrades'));
    expect(section).toContain(`${rule.baseMiB} MiB + ${rule.perTenThousandEndpointsMiB} MiB per 10,000 endpoints`);
    expect(section).toContain(`**${rule.churnFactor} ×**`);
    for (const [endpoints, label] of [
      [0, 'empty'],
      [100000, '10,000 Services, 100,000 endpoints'],
    ] as const) {
      const row = section.split('\n').find((l) => l.startsWith(`| ${label}`)) ?? '';
      expect(row).toContain(`| ${Math.round(memoryFor(rule, endpoints))} MiB | ${Math.round(peak(endpoints))} MiB |`);
    }
  });

  it('is met by the record-builder’s request and limit in the manifests', () => {
    const docs = loadAllYaml(readFileSync(`${root}/manifests/base/deployment.yaml`, 'utf8')) as Array<{
      kind: string;
      spec: {
        template: {
          spec: {
            containers: Array<
              Record<string, unknown> & {
                name: string;
                env: Array<{ name: string; value: string }>;
                resources: { requests: { memory: string }; limits: { memory: string } };
              }
            >;
          };
        };
      };
    }>;
    const kubedns = docs
      .find((d) => d.kind === 'Deployment')
      ?.spec.template.spec.containers.find((c) => c.name === 'kubedns');
    const mib = (q: string | undefined) => Number(/^(\d+)Mi$/.exec(q ?? '')?.[1]);
    // The manifests' size: 10,000 Services and 100,000 endpoints, at their peak under churn.
    expect(mib(kubedns?.resources.requests.memory)).toBeGreaterThanOrEqual(peak(100000));
    const options = kubedns?.env.find((e: { name: string }) => e.name === 'NODE_OPTIONS')?.value as string;
    const heapCap = Number(/--max-old-space-size=(\d+)/.exec(options)?.[1]);
    expect(mib(kubedns?.resources.limits.memory)).toBeGreaterThanOrEqual(2 * heapCap + 100);
  });
});

describe('the node cache’s sizing (case 11)', () => {
  const { nodeCache } = rule;

  it('is measured at the worker count a node cache starts with when no CPU limit is set', () => {
    expect(nodeCache.workers).toBe(NODE_CACHE_DEFAULT_WORKERS);
    expect(NODE_CACHE_DEFAULT_WORKERS).toBe(WORKERS_WITHOUT_QUOTA);
  });

  it('is met by the node-local DaemonSet’s memory request, and quoted by node-local’s README', () => {
    const docs = loadAllYaml(readFileSync(`${root}/manifests/node-local/daemonset.yaml`, 'utf8')) as Array<{
      kind: string;
      spec: { template: { spec: { containers: Array<{ resources: { requests: { memory: string } } }> } } };
    }>;
    const cache = docs.find((d) => d.kind === 'DaemonSet')?.spec.template.spec.containers[0];
    const requested = Number(/^(\d+)Mi$/.exec(cache?.resources.requests.memory ?? '')?.[1]);
    expect(requested).toBeGreaterThanOrEqual(nodeCache.rssMiB);
    const readme = readFileSync(`${root}/packages/forwarder/src/node-local/README.md`, 'utf8');
    expect(readme).toContain(`${nodeCache.rssMiB} MiB of RSS`);
    expect(readme).toContain(`~${nodeCache.perWorkerMiB} MiB`);
  });
});
