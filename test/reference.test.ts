import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  createForwarderMetrics,
  forwarderFlags,
  NamespaceTally,
  namespaceQueriesMetric,
  nodeCacheFlags,
  ServerQueryCounts,
  UpstreamStats,
} from '@cluster-dns/forwarder';
import { createRecordBuilderMetrics, recordBuilderFlags } from '@cluster-dns/record-builder';
import { type FlagDef, ProgrammingLatency } from '@cluster-dns/runtime';
import { createSidecarMetrics, parseProbeFlag, sidecarFlags } from '@cluster-dns/sidecar';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';

// docs/reference/<process>.md: every flag and every metric, generated from the flag tables and
// the metric definitions, so the reference cannot fall behind the code. `pnpm reference` writes
// them; this test fails when one is not what the code would write.

const root = fileURLToPath(new URL('..', import.meta.url));
const cell = (text: string) => text.replaceAll('|', '\\|').replaceAll('\n', ' ');

function flagRows(table: Record<string, FlagDef<unknown>>, dash: '-' | '--'): string[] {
  return Object.entries(table).map(([name, def]) => {
    const shown =
      def.defaultText ?? (def.takes === 'bool' ? '' : Array.isArray(def.defaultValue) ? '' : String(def.defaultValue));
    const aliases = def.aliases.length
      ? ` (${def.aliases.map((a) => `\`${a.length === 1 ? '-' : dash}${a}\``).join(', ')})`
      : '';
    return `| \`${dash}${name}\`${aliases} | ${shown === '' ? '' : `\`${cell(shown)}\``} | ${cell(def.help)} |`;
  });
}

function metricRows(registry: Registry): string[] {
  return registry
    .getMetricsAsArray()
    .filter((m) => !/^(process|nodejs)_/.test(m.name))
    .sort((a, b) => a.name.localeCompare(b.name))
    .map((m) => `| \`${m.name}\` | ${m.type} | ${cell((m as unknown as { help: string }).help)} |`);
}

function page(title: string, intro: string, flags: string[], metrics: string[]): string {
  return [
    `# ${title}: reference`,
    '',
    `${intro} Generated from the flag table and the metric definitions by \`pnpm reference\`; a test`,
    'fails when it is behind the code.',
    '',
    '## Flags',
    '',
    '| flag | default | meaning |',
    '|---|---|---|',
    ...flags,
    '',
    ...(metrics.length
      ? [
          '## Metrics',
          '',
          'Besides the `process_*` and `nodejs_*` series.',
          '',
          '| metric | type | meaning |',
          '|---|---|---|',
          ...metrics,
          '',
        ]
      : []),
  ].join('\n');
}

const pages: Record<string, () => string> = {
  'record-builder': () => {
    const registry = new Registry();
    createRecordBuilderMetrics(registry);
    return page(
      'record-builder',
      'The `kubedns` container ([README](../../packages/record-builder/README.md)).',
      flagRows(recordBuilderFlags, '--'),
      metricRows(registry),
    );
  },
  forwarder: () => {
    const registry = new Registry();
    // Registering reads no source but the histograms': the collectors read them at scrape time.
    const sources = {
      processMetrics: false,
      zones: { counts: { programming: new ProgrammingLatency() } },
      upstreams: new UpstreamStats(),
      queries: new ServerQueryCounts(() => ({ server: '', zone: '.' })),
      // A forwarder reports its cache's own series (a pool's, worker 0's: the shared store).
      cache: {},
      // The series of what is off by default: autopath's, and (below) the namespace series.
      autopath: { walked: 0, found: 0, skipped: 0 },
    };
    createForwarderMetrics(registry, sources as unknown as Parameters<typeof createForwarderMetrics>[1]);
    namespaceQueriesMetric(registry, new NamespaceTally(1), async () => undefined);
    return page(
      'forwarder',
      "The `dnsmasq` container, the Pod's port 53, and Corefile mode ([README](../../packages/forwarder/README.md)).",
      flagRows(forwarderFlags, '--'),
      metricRows(registry),
    );
  },
  'node-cache': () =>
    page(
      'node-cache',
      "The forwarder in node-local mode, with node-cache's flags (Go spellings: `-flag value`, `-flag=value`, `--flag`); its metrics are the forwarder's, and `coredns_nodecache_setup_errors_total` on `-metrics-listen-address` ([README](../../packages/forwarder/src/node-local/README.md)).",
      flagRows(nodeCacheFlags, '-'),
      [],
    ),
  sidecar: () => {
    const registry = new Registry();
    // kube-dns's two probes: the per-probe series are named after each probe's label.
    const probes = [
      'kubedns,127.0.0.1:10053,kubernetes.default.svc.cluster.local,5,SRV',
      'dnsmasq,127.0.0.1:53,kubernetes.default.svc.cluster.local,5,SRV',
    ].map((raw) => parseProbeFlag(raw, '--probe'));
    createSidecarMetrics(registry, 'kubedns', probes);
    return page(
      'sidecar',
      "The `sidecar` container ([README](../../packages/sidecar/README.md)); the probe series as kube-dns's two probes, `kubedns` and `dnsmasq`, name them.",
      flagRows(sidecarFlags, '--'),
      metricRows(registry),
    );
  },
};

describe('the generated reference', () => {
  it.each(Object.keys(pages))('docs/reference/%s.md is what the code says', (name) => {
    const path = `${root}/docs/reference/${name}.md`;
    const want = (pages[name] as () => string)();
    if (process.env.UPDATE_REFERENCE === '1') writeFileSync(path, want);
    expect(readFileSync(path, 'utf8')).toBe(want);
  });
});
