import { describe, expect, it } from 'vitest';
import { readBlockPlugins } from '../../server/block-plugins.js';
import { blockFilesOf } from '../../server/corefile-plan.js';
import { askCase, corednsCaseSuite, loadCases, readCase } from '../../testing/coredns-cases.js';
import { BufsizeStage } from './bufsize-stage.js';

corednsCaseSuite('bufsize', { stage: (plugins) => new BufsizeStage(() => plugins.bufsize) });

// What CoreDNS's tests check of the request passed on: its EDNS0 size (here, the size a reply to it may have).
describe('bufsize: the size the stages after it see', () => {
  it.each(
    loadCases('bufsize')
      .serve.filter((c) => c.expect.nextBufsize !== undefined)
      .map((c) => [c.name, c] as const),
  )('%s', async (_name, c) => {
    const { servers } = readCase(c);
    const plugins = readBlockPlugins({ servers: servers ?? [], ...blockFilesOf(servers ?? []) }, () => undefined);
    const stage = new BufsizeStage(() => plugins.bufsize);
    const asked = await askCase(c, (next) => (request) => stage.serve(request, next));
    const seen = asked.seen[0];
    expect(seen?.query.edns ? seen.limitBytes : null).toBe(c.expect.nextBufsize);
  });
});
