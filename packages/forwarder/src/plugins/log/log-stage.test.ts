import { createLogger, type LogRule } from '@cluster-dns/runtime';
import { QTYPE } from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import type { BlockScoped } from '../../config/block-scoped.js';
import { blockPluginsOf } from '../../server/block-plugins.js';
import { askCase, loadCases, readCase, type ServeCase } from '../../testing/coredns-cases.js';
import { LogStage } from './log-stage.js';

/** The stage over a case's Corefile, its lines caught, every query reaching it (as the Go handler test). */
function logged(c: ServeCase, podOf: (remote: string) => string | undefined = () => undefined) {
  const { servers, error } = readCase(c);
  if (error) throw error;
  const rules = blockPluginsOf(servers ?? [], { hosts: [], files: [] }).logs.map(
    (b): BlockScoped<readonly LogRule[]> => ({ ...b, zones: ['.' as never] }),
  );
  const lines: Array<Record<string, unknown>> = [];
  const log = createLogger({ component: 'forwarder', level: 'debug', write: (text) => lines.push(JSON.parse(text)) });
  const stage = new LogStage({ rules: () => rules, log, podOf: (request) => podOf(request.context.remoteAddress) });
  return { stage, lines };
}

describe('log, against CoreDNS’s own tables (testdata/coredns-cases.json)', () => {
  const cases = loadCases('log');
  it.each(cases.setup.map((c) => [c.name, c] as const))('setup: %s', (_name, c) => {
    const { error, servers } = readCase(c);
    expect(error === undefined, error?.message ?? 'accepted').toBe(c.valid);
    const rules = (c as { expectConfig?: { rules?: Array<{ nameScope: string; format: string; classes: string[] }> } })
      .expectConfig?.rules;
    if (rules && servers)
      expect(
        servers[0]?.logRules.map((r) => ({ nameScope: r.scope, format: r.format, classes: [...r.classes].sort() })),
      ).toEqual(rules.map((r) => ({ ...r, classes: [...r.classes].sort() })));
  });

  it.each(cases.serve.map((c) => [c.name, c] as const))('serve: %s', async (_name, c) => {
    const { stage, lines } = logged(c);
    // "No next plugin": the chain ends in SERVFAIL, as CoreDNS's NextOrFailure.
    const noNext = (c as { noNextPlugin?: boolean }).noNextPlugin;
    const asked = await askCase(
      noNext ? { ...c, next: { rcode: 'SERVFAIL' } } : c,
      (next) => (request) => stage.serve(request, next),
    );
    const e = c.expect as { expectLog?: string; expectLogNotContains?: string; expectNoLog?: boolean };
    const texts = lines.map((l) => String(l.text));
    if (e.expectNoLog) expect(texts).toEqual([]);
    if (e.expectLog) expect(texts.join('\n')).toContain(e.expectLog);
    if (e.expectLogNotContains) expect(texts.join('\n')).not.toContain(e.expectLogNotContains);
    expect(asked.reply || noNext).toBeTruthy();
  });
});

describe('the log stage', () => {
  const c: ServeCase = {
    name: 'pod',
    corefile: 'log . "{remote} {name} {type} {rcode} {>rflags}"',
    query: { name: 'web.shop.svc.cluster.local.', type: 'A', remote: '10.0.0.7' },
    next: { rcode: 'NOERROR', answer: ['web.shop.svc.cluster.local. 5 IN A 10.96.0.20'] },
    expect: {},
  };

  it('writes CoreDNS’s line as a JSON field, and names the pod a node cache carried', async () => {
    const { stage, lines } = logged(c, (remote) => (remote === '10.0.0.7' ? '10.244.1.9' : undefined));
    await askCase(c, (next) => (request) => stage.serve(request, next));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      level: 'info',
      msg: 'query',
      text: '10.0.0.7 web.shop.svc.cluster.local. A NOERROR qr,rd,ra',
      remote: '10.0.0.7',
      pod: '10.244.1.9',
      type: 'A',
      rcode: 'NOERROR',
      class: 'success',
    });
  });

  it('logs only the classes asked for: denial is NXDOMAIN and NODATA, not an answer', async () => {
    const denial = { ...c, corefile: 'log {\n class denial\n}' };
    for (const [next, count] of [
      [{ rcode: 'NXDOMAIN' }, 1],
      [
        { rcode: 'NOERROR', authority: ['cluster.local. 5 IN SOA ns.dns.cluster.local. h.cluster.local. 1 2 3 4 5'] },
        1,
      ],
      [c.next, 0],
    ] as const) {
      const { stage, lines } = logged(denial);
      await askCase({ ...denial, next }, (n) => (request) => stage.serve(request, n));
      expect(lines.length, JSON.stringify(next)).toBe(count);
    }
    expect(QTYPE.A).toBe(1);
  });
});
