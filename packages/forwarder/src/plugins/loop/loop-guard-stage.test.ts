import { chainStages, QTYPE, RCODE, toFqdn } from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import { askThrough } from '../../testing/test-chain.js';
import { LoopGuardStage } from './loop-guard-stage.js';

// The stage in front of an end that notes the names that reached it.
const reached: string[] = [];
const end = (request: { query: { qname: string } }) => {
  reached.push(request.query.qname);
  return undefined;
};

describe('the loop guard stage', () => {
  it('refuses our own loop probes instead of forwarding them again, and passes the rest on', async () => {
    reached.length = 0;
    const probe = toFqdn('abc.loop-check.cluster-dns.invalid');
    const stage = new LoopGuardStage({ outstanding: () => true, isProbe: (name) => name === probe });
    const ask = askThrough(chainStages([stage], end));
    expect((await ask('abc.loop-check.cluster-dns.invalid', QTYPE.TXT)).flags.rcode).toBe(RCODE.REFUSED);
    await expect(ask('www.example.org')).rejects.toThrow(/no single reply/);
    expect(reached).toEqual(['www.example.org.']);
    expect(stage.refused).toBe(1);
  });
});
