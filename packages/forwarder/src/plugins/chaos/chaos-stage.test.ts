import { chainStages, QCLASS, QTYPE, RCODE } from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import { askThrough } from '../../testing/test-chain.js';
import { ChaosStage } from './chaos-stage.js';

// The stage in front of an end that notes the names that reached it.
const reached: string[] = [];
const end = (request: { query: { qname: string } }) => {
  reached.push(request.query.qname);
  return undefined;
};

describe('the chaos stage', () => {
  const stats = () => ({
    cachesize: 100,
    insertions: 3,
    evictions: 0,
    misses: 4,
    hits: 5,
    auth: 0,
    servers: ['192.0.2.53#53 4 1'],
    version: 'v',
  });

  it('answers dnsmasq’s statistics, with an OPT when asked with EDNS, and refuses other CHAOS names', async () => {
    const stage = new ChaosStage({ stats, hostname: 'test' });
    const ask = askThrough(chainStages([stage], end));
    const hits = await ask('hits.bind', QTYPE.TXT, { qclass: QCLASS.CH, edns: { udpSize: 1232 } });
    expect(hits.answers.map((a) => a.text)).toEqual([['5']]);
    expect(hits.additionals.map((a) => a.type)).toEqual([QTYPE.OPT]);
    expect((await ask('servers.bind', QTYPE.TXT, { qclass: QCLASS.CH })).answers[0]?.text).toEqual([
      '192.0.2.53#53 4 1',
    ]);
    expect((await ask('nothing.bind', QTYPE.TXT, { qclass: QCLASS.CH })).flags.rcode).toBe(RCODE.REFUSED);
    expect(stage.answered).toBe(2);
  });

  it('passes every other class on', async () => {
    reached.length = 0;
    const ask = askThrough(chainStages([new ChaosStage({ stats, hostname: 'test' })], end));
    await expect(ask('hits.bind', QTYPE.TXT)).rejects.toThrow(/no single reply/);
    expect(reached).toEqual(['hits.bind.']);
  });
});
