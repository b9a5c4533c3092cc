import { chainStages, OPCODE, QTYPE, RCODE } from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import { askThrough } from '../../testing/test-chain.js';
import { NotifyStage } from './notify-stage.js';
import type { ZoneSync } from './zone-sync.js';

// The stage in front of an end that notes the names that reached it.
const reached: string[] = [];
const end = (request: { query: { qname: string } }) => {
  reached.push(request.query.qname);
  return undefined;
};

describe('the notify stage', () => {
  const zones = (result: 'accepted' | 'refused' | 'failed') => ({ notify: async () => result }) as unknown as ZoneSync;
  const notify = { opcode: OPCODE.NOTIFY };

  it.each([
    ['accepted', RCODE.NOERROR, { accepted: 1, refused: 0 }],
    ['failed', RCODE.SERVFAIL, { accepted: 1, refused: 0 }],
    ['refused', RCODE.REFUSED, { accepted: 0, refused: 1 }],
  ] as const)('answers a NOTIFY the zone sync calls %s with rcode %i, and counts it', async (result, rcode, counts) => {
    const stage = new NotifyStage(zones(result));
    const reply = await askThrough(chainStages([stage], end))('cluster.local', QTYPE.SOA, notify);
    expect(reply.flags.rcode).toBe(rcode);
    expect(reply.flags.opcode).toBe(OPCODE.NOTIFY);
    expect(stage.counts).toEqual(counts);
  });

  it('refuses a NOTIFY for anything but SOA, or when nothing is pushed here; passes queries on', async () => {
    reached.length = 0;
    const ask = askThrough(chainStages([new NotifyStage(undefined)], end));
    expect((await ask('cluster.local', QTYPE.SOA, notify)).flags.rcode).toBe(RCODE.REFUSED);
    const pushed = askThrough(chainStages([new NotifyStage(zones('accepted'))], end));
    expect((await pushed('cluster.local', QTYPE.A, notify)).flags.rcode).toBe(RCODE.REFUSED);
    await expect(pushed('www.example.org')).rejects.toThrow(/no single reply/);
    expect(reached).toEqual(['www.example.org.']);
  });
});
