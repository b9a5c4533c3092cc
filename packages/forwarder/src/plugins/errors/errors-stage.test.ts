import { createLogger } from '@cluster-dns/runtime';
import { buildBareResponse } from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import { blockPluginsOf } from '../../server/block-plugins.js';
import { askCase, loadCases, rcodeOf, readCase, type ServeCase } from '../../testing/coredns-cases.js';
import { ErrorsStage, goDuration } from './errors-stage.js';

/** CoreDNS's log prefix by level, as the Go tests look for it. */
const PREFIX: Record<string, string> = { error: '[ERROR]', warn: '[WARNING]', info: '[INFO]', debug: '[DEBUG]' };

/** The stage over a case's Corefile: its lines caught as CoreDNS would print them, its timers in the test's hand. */
function setUp(c: ServeCase) {
  const { servers, error } = readCase(c);
  if (error) throw error;
  const configs = blockPluginsOf(servers ?? [], { hosts: [], files: [] }).errors.map((b) => ({
    ...b,
    zones: ['.' as never],
  }));
  const lines: string[] = [];
  const log = createLogger({
    component: 'forwarder',
    level: 'debug',
    write: (text) => {
      const line = JSON.parse(text) as { level: string; msg: string };
      lines.push(`${PREFIX[line.level] ?? line.level} plugin/errors: ${line.msg}`);
    },
  });
  const timers: Array<() => void> = [];
  const stage = new ErrorsStage({
    configs: () => configs,
    log,
    setTimer: (run) => {
      timers.push(run);
      return setTimeout(() => undefined, 0);
    },
  });
  return { stage, lines, timers };
}

describe('errors, against CoreDNS’s own tables (testdata/coredns-cases.json)', () => {
  const cases = loadCases('errors');
  it.each(cases.setup.map((c) => [c.name, c] as const))('setup: %s', (_name, c) => {
    const { error } = readCase(c);
    expect(error === undefined, error?.message ?? 'accepted').toBe(c.valid);
  });

  it.each(cases.serve.map((c) => [c.name, c] as const))('serve: %s', async (_name, c) => {
    const { stage, lines, timers } = setUp(c);
    const next = c.next as { rcode?: string; error?: string };
    const e = c.expect as Record<string, string | undefined>;
    for (let i = 0; i < ((c as { repeat?: number }).repeat ?? 1); i++) {
      const asked = await askCase(
        c,
        () => (request) =>
          stage.serve(request, (r) => {
            if (next.error) r.error = new Error(next.error);
            return buildBareResponse(r.query, rcodeOf(next.rcode), { recursionAvailable: true });
          }),
      );
      expect(asked.reply?.flags.rcode).toBe(rcodeOf(e.rcode));
    }
    if (e.expectLog) expect(lines.join('\n')).toContain(e.expectLog);
    if (!e.expectLog && !next.error) expect(lines).toEqual([]);
    const before = lines.length;
    if (e.expectLogOnShutdown) {
      stage.flush();
      expect(lines.slice(before).join('\n')).toContain(e.expectLogOnShutdown);
      return;
    }
    for (const run of timers.splice(0)) run();
    if (e.expectLogAfterPeriod) expect(lines.slice(before).join('\n')).toContain(e.expectLogAfterPeriod);
    if (e.expectLogAfterPeriodNotContains)
      expect(lines.slice(before).join('\n')).not.toContain(e.expectLogAfterPeriodNotContains);
  });
});

describe('the errors stage', () => {
  it('prints periods as Go does', () => {
    expect([2000, 300_000, 3_600_000, 1500].map(goDuration)).toEqual(['2s', '5m0s', '1h0m0s', '1.5s']);
  });
});
