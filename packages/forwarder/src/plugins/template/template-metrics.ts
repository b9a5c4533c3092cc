import { labelledFrom } from '@cluster-dns/runtime';
import type { Registry } from 'prom-client';
import type { TemplateCounts } from './template-stage.js';

/** CoreDNS's template series, read from the stage's counts at scrape time. */
export function registerTemplateMetrics(registry: Registry, counts: TemplateCounts, server: () => string): void {
  labelledFrom(
    registry,
    'coredns_template_matches_total',
    'Queries a template answered, by zone, class and type.',
    ['server', 'zone', 'view', 'class', 'type'],
    () =>
      [...counts.matches].map(([key, n]) => {
        const [zone = '', klass = '', type = ''] = key.split('\t');
        return [{ server: server(), zone, view: '', class: klass, type }, n];
      }),
  );
  labelledFrom(
    registry,
    'coredns_template_template_failures_total',
    'Templates that failed to run or made text that is not a record, by section.',
    ['server', 'section'],
    () => [...counts.failures].map(([section, n]) => [{ server: server(), section }, n]),
  );
}
