import { readCorefile } from '@cluster-dns/runtime';
import {
  buildBareResponse,
  chainStages,
  encodeMessage,
  finishFromTemplate,
  QTYPE,
  RCODE,
  toFqdn,
} from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import type { ForwarderRequest } from '../../config/forwarder-request.js';
import { askThrough } from '../../testing/test-chain.js';
import { AclStage, scopedAcl } from './acl-stage.js';

/** The stage with one block's acl in front of an answerer that says NOERROR to all, or the client map. */
function stageWith(block: string, carried?: string) {
  const [server] = readCorefile(`.:53 {\n${block}\n forward . 192.0.2.53\n}`, { mode: 'pod' });
  const first = server?.acls[0];
  if (!first) throw new Error('no acl');
  const acls = [scopedAcl(first, [toFqdn('.')])];
  const passed: string[] = [];
  const stage = new AclStage(
    () => acls,
    (request) => ({ address: carried ?? request.context.remoteAddress, carried: carried !== undefined }),
    toFqdn('cluster.local'),
    (sender) => sender === '192.168.0.10',
  );
  const ask = askThrough(
    chainStages<ForwarderRequest>([stage], (request) => {
      const q = request.query;
      if (q.key.endsWith('.client.dns.cluster.local.')) {
        const namespace = q.key.startsWith('10-244-1-') ? 'shop' : q.key.startsWith('10-244-2-') ? 'other' : undefined;
        if (!namespace) return buildBareResponse(q, RCODE.NXDOMAIN);
        const wire = encodeMessage({
          id: 0,
          flags: { qr: true, opcode: 0, aa: false, tc: false, rd: true, ra: true, ad: false, cd: false, rcode: 0 },
          questions: [{ name: q.key, type: q.qtype, class: 1 }],
          answers: [
            { name: q.key, type: QTYPE.TXT, class: 1, ttl: 30, text: [`namespace=${namespace}`, 'search=default'] },
          ],
          authorities: [],
          additionals: [],
        });
        return finishFromTemplate(wire, q, request.limitBytes);
      }
      passed.push(q.key);
      return buildBareResponse(q, RCODE.NOERROR);
    }),
  );
  const from = (address: string) => ({
    context: { transport: 'udp' as const, remoteAddress: address, remotePort: 4000, family: 4 as const },
  });
  return { stage, ask, from, passed };
}

const rcodeOf = async (p: Promise<{ flags: { rcode: number } }>) => (await p).flags.rcode;

describe('acl: who may ask what', () => {
  it('takes the first rule a query matches, by type and net; allows what none matches', async () => {
    const s = stageWith(
      'acl {\n allow net 10.0.0.9/32\n block type ANY AXFR\n filter type AAAA net 10.0.0.0/8\n drop net 192.0.2.0/24\n}',
    );
    expect(await rcodeOf(s.ask('x.example.org', QTYPE.ANY, s.from('10.0.0.9')))).toBe(RCODE.NOERROR);
    expect(await rcodeOf(s.ask('x.example.org', QTYPE.ANY, s.from('10.0.0.8')))).toBe(RCODE.REFUSED);
    const filtered = await s.ask('x.example.org', QTYPE.AAAA, s.from('10.1.2.3'));
    expect([filtered.flags.rcode, filtered.answers.length]).toEqual([RCODE.NOERROR, 0]);
    await expect(s.ask('x.example.org', QTYPE.A, s.from('192.0.2.7'))).rejects.toThrow(/no single reply/);
    expect(await rcodeOf(s.ask('x.example.org', QTYPE.A, s.from('172.16.0.1')))).toBe(RCODE.NOERROR);
    expect(s.stage.counts).toEqual({ allow: 2, block: 1, filter: 1, drop: 1 });
    // Only the allowed ones went on.
    expect(s.passed).toEqual(['x.example.org.', 'x.example.org.']);
  });

  it('matches a namespace by the client map, and an unknown client matches no namespace', async () => {
    const s = stageWith('acl {\n allow namespace shop\n block type TXT\n}');
    expect(await rcodeOf(s.ask('x.example.org', QTYPE.TXT, s.from('10.244.1.5')))).toBe(RCODE.NOERROR);
    expect(await rcodeOf(s.ask('x.example.org', QTYPE.TXT, s.from('10.244.2.5')))).toBe(RCODE.REFUSED);
    expect(await rcodeOf(s.ask('x.example.org', QTYPE.TXT, s.from('10.9.9.9')))).toBe(RCODE.REFUSED);
  });

  it('judges the pod a trusted node cache names, not the node cache', async () => {
    const s = stageWith('acl {\n block net 10.244.2.0/24\n}', '10.244.2.5');
    expect(await rcodeOf(s.ask('x.example.org', QTYPE.A, s.from('192.168.0.10')))).toBe(RCODE.REFUSED);
  });

  it('answers the client map only to whom may read it (a trusted node cache), never to a pod', async () => {
    const s = stageWith('acl {\n allow net 10.0.0.0/8\n}');
    const name = '10-244-1-5.client.dns.cluster.local';
    expect(await rcodeOf(s.ask(name, QTYPE.TXT, s.from('10.244.1.7')))).toBe(RCODE.REFUSED);
    expect(await rcodeOf(s.ask(name, QTYPE.TXT, s.from('192.168.0.10')))).toBe(RCODE.NOERROR);
    expect(s.stage.clientMapRefused).toBe(1);
  });

  it('refuses a bad line naming it', () => {
    expect(() =>
      readCorefile('.:53 {\n acl {\n  deny net 10.0.0.0/8\n }\n forward . 192.0.2.53\n}', { mode: 'pod' }),
    ).toThrow(/line 3.*acl deny: the action must be allow, block, filter, drop/);
    expect(() =>
      readCorefile('.:53 {\n acl {\n  block net 10.0.0.0/33\n }\n forward . 192.0.2.53\n}', { mode: 'pod' }),
    ).toThrow(/line 3.*not an IP address or CIDR block/);
    expect(() =>
      readCorefile('.:53 {\n acl {\n  block type BOGUS\n }\n forward . 192.0.2.53\n}', { mode: 'pod' }),
    ).toThrow(/line 3.*"BOGUS" is not a record type/);
  });
});
