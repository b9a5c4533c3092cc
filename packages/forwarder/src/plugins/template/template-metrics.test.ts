import { readCorefile } from '@cluster-dns/runtime';
import { chainStages, QTYPE } from '@cluster-dns/wire';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { readBlockPlugins } from '../../server/block-plugins.js';
import { askThrough } from '../../testing/test-chain.js';
import { registerTemplateMetrics } from './template-metrics.js';
import { TemplateStage } from './template-stage.js';

describe('template metrics', () => {
  it('counts each answered question under CoreDNS’s series, by zone, class and type', async () => {
    const servers = readCorefile(
      '.:53 {\n template IN A example.org {\n  answer "{{ .Name }} 60 IN A 192.0.2.1"\n }\n forward . 192.0.2.53\n}\n',
      { mode: 'pod' },
    );
    const plugins = readBlockPlugins({ servers, hosts: [], files: [] }, () => undefined);
    const stage = new TemplateStage({ templates: () => plugins.templates, lookup: () => Promise.resolve(undefined) });
    const registry = new Registry();
    registerTemplateMetrics(registry, stage.counts, () => 'dns://:53');
    const ask = askThrough(chainStages([stage], () => undefined));
    await ask('a.example.org', QTYPE.A);
    await ask('b.example.org', QTYPE.A);
    const text = await registry.metrics();
    expect(text).toContain(
      'coredns_template_matches_total{server="dns://:53",zone="example.org.",view="",class="IN",type="A"} 2',
    );
  });
});
