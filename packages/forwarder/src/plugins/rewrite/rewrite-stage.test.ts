import { readCorefile } from '@cluster-dns/runtime';
import {
  chainStages,
  encodeMessage,
  type Fqdn,
  finishFromTemplate,
  QTYPE,
  scanResponse,
  toFqdn,
} from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import type { ForwarderRequest } from '../../config/forwarder-request.js';
import { askThrough, testRoute } from '../../testing/test-chain.js';
import { rewriteQuestion } from './rewrite-rules.js';
import { RewriteStage } from './rewrite-stage.js';

const rules = (...lines: string[]) =>
  readCorefile(`.:53 {\n${lines.join('\n')}\n forward . 192.0.2.53\n}`, { mode: 'pod' })[0]?.rewrite ?? [];
const asked = (lines: string[], name: string, qtype: number = QTYPE.A) => {
  const r = rewriteQuestion(rules(...lines), toFqdn(name), qtype);
  return typeof r === 'object' ? [r.name, r.qtype] : r;
};

describe('rewrite rules on a question, as CoreDNS applies them', () => {
  it.each([
    [
      'exact',
      'rewrite name exact old.example.org web.shop.svc.cluster.local',
      'old.example.org',
      'web.shop.svc.cluster.local.',
    ],
    [
      'exact, the default',
      'rewrite name old.example.org web.shop.svc.cluster.local',
      'OLD.example.org',
      'web.shop.svc.cluster.local.',
    ],
    ['prefix', 'rewrite name prefix www web', 'www.example.org', 'web.example.org.'],
    [
      'suffix',
      'rewrite name suffix .corp.example .shop.svc.cluster.local',
      'api.corp.example',
      'api.shop.svc.cluster.local.',
    ],
    [
      'substring',
      'rewrite name substring us-west-1.example.org us-west-1.consul',
      'ftp.us-west-1.example.org',
      'ftp.us-west-1.consul.',
    ],
    [
      'regex',
      'rewrite name regex (.*)-v1\\.example\\.org {1}.default.svc.cluster.local',
      'api-v1.example.org',
      'api.default.svc.cluster.local.',
    ],
  ])('%s', (_kind, line, from, to) => {
    expect(asked([line], from)).toEqual([to, QTYPE.A]);
  });

  it('leaves a name no rule matches, stops at the first match, goes on with continue', () => {
    expect(asked(['rewrite name exact a.example.org b.example.org'], 'c.example.org')).toBeUndefined();
    const chain = ['rewrite name exact a.example.org b.example.org', 'rewrite name exact b.example.org c.example.org'];
    expect(asked(chain, 'a.example.org')).toEqual(['b.example.org.', QTYPE.A]);
    expect(asked([`rewrite continue ${chain[0]?.slice(8)}`, chain[1] as string], 'a.example.org')).toEqual([
      'c.example.org.',
      QTYPE.A,
    ]);
    expect(asked(['rewrite type ANY HINFO'], 'a.example.org', QTYPE.ANY)).toEqual(['a.example.org.', QTYPE.HINFO]);
  });

  it('says so when a rule makes something that is not a name', () => {
    expect(asked(['rewrite name regex (.*)\\.example\\.org {1}..bad'], 'a.example.org')).toBe('invalid');
  });
});

describe('the rewrite stage', () => {
  /** An upstream that answers A 192.0.2.9 for whatever name it is asked, noting the names. */
  function stageWith(...lines: string[]) {
    const names: Fqdn[] = [];
    const stage = new RewriteStage(() => [{ zones: [toFqdn('.')], rules: rules(...lines) }]);
    const forward = (request: ForwarderRequest) => {
      const q = request.query;
      names.push(q.key);
      const wire = encodeMessage({
        id: 0,
        flags: { qr: true, opcode: 0, aa: false, tc: false, rd: true, ra: true, ad: false, cd: false, rcode: 0 },
        questions: [{ name: q.key, type: q.qtype, class: 1 }],
        answers: [{ name: q.key, type: QTYPE.A, class: 1, ttl: 30, address: '192.0.2.9' }],
        authorities: [],
        additionals: [],
      });
      request.resolved = { wire, scanned: scanResponse(wire), route: testRoute() };
      return Promise.resolve(finishFromTemplate(wire, q, request.limitBytes));
    };
    const requests: ForwarderRequest[] = [];
    const keep = (request: ForwarderRequest, next: (r: ForwarderRequest) => ReturnType<typeof forward>) => {
      requests.push(request);
      return next(request);
    };
    return {
      ask: askThrough(chainStages<ForwarderRequest>([stage, { name: 'spy', serve: keep }], forward)),
      names,
      requests,
    };
  }

  it('asks the rewritten name and answers the question asked, the answer’s names mapped back (exact)', async () => {
    const s = stageWith('rewrite name exact db.example.org pg.data.svc.cluster.local');
    const reply = await s.ask('DB.example.org');
    expect(s.names).toEqual(['pg.data.svc.cluster.local.']);
    expect(reply.questions[0]?.name).toBe('DB.example.org.');
    // The owner is a pointer to the question: it reads as asked.
    expect(reply.answers.map((a) => [a.name, a.address])).toEqual([['DB.example.org.', '192.0.2.9']]);
    // Before the cache (CoreDNS's order since 1.14.2): the stages after see, and keep, the rewritten question.
    expect(s.requests.map((r) => r.query.key)).toEqual(['pg.data.svc.cluster.local.']);
  });

  it('maps names back for a suffix with answer auto, and leaves them without it', async () => {
    const auto = stageWith('rewrite name suffix .corp.example .shop.svc.cluster.local answer auto');
    expect((await auto.ask('api.corp.example')).answers.map((a) => a.name)).toEqual(['api.corp.example.']);
    const plain = stageWith('rewrite name suffix .corp.example .shop.svc.cluster.local');
    expect((await plain.ask('api.corp.example')).answers.map((a) => a.name)).toEqual(['api.shop.svc.cluster.local.']);
  });

  it('maps names back with answer name (a regex)', async () => {
    const s = stageWith(
      'rewrite stop name regex (.*)-(us-west-1)\\.example\\.org {1}.service.{2}.consul answer name (.*)\\.service\\.(us-west-1)\\.consul {1}-{2}.example.org',
    );
    const reply = await s.ask('ftp-us-west-1.example.org');
    expect(s.names).toEqual(['ftp.service.us-west-1.consul.']);
    expect(reply.answers.map((a) => a.name)).toEqual(['ftp-us-west-1.example.org.']);
  });

  it('answers SERVFAIL when a rule makes no name, and passes names no rule matches untouched', async () => {
    const s = stageWith('rewrite name regex (.*)\\.example\\.org {1}..bad');
    expect((await s.ask('a.example.org')).flags.rcode).toBe(2);
    expect(s.names).toEqual([]);
    await s.ask('www.example.net');
    expect(s.names).toEqual(['www.example.net.']);
  });
});
