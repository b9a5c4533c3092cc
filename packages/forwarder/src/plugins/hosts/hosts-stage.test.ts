import { parseHostsText, readCorefile } from '@cluster-dns/runtime';
import { buildBareResponse, chainStages, QTYPE, RCODE, toFqdn } from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import type { ForwarderRequest } from '../../config/forwarder-request.js';
import { askThrough } from '../../testing/test-chain.js';
import { HostsStage } from './hosts-stage.js';
import { HostsTable } from './hosts-table.js';

const FILE = `# a comment
127.0.0.1 localhost
192.0.2.10 files.example.org files # trailing
2001:db8::10 files.example.org
bad-address ignored.example.org
`;

function stageWith(block: string) {
  const hosts = readCorefile(`.:53 {\n${block}\n forward . 192.0.2.53\n}`, { mode: 'pod' })[0]?.hosts;
  if (!hosts) throw new Error('no hosts');
  const table = new HostsTable({ ...hosts, zones: hosts.zones ?? [toFqdn('.')] }, parseHostsText(FILE));
  let forwarded = 0;
  const ask = askThrough(
    chainStages<ForwarderRequest>([new HostsStage(() => [{ zones: [toFqdn('.')], value: table }])], (request) => {
      forwarded++;
      return buildBareResponse(request.query, RCODE.NXDOMAIN, { recursionAvailable: true });
    }),
  );
  return { ask, forwarded: () => forwarded };
}

describe('the hosts stage', () => {
  it('answers A, AAAA and PTR from the file and the inline entries, authoritatively, with its TTL', async () => {
    const s = stageWith('hosts /etc/hosts {\n 192.0.2.80 www.example.org\n ttl 60\n}');
    const a = await s.ask('WWW.example.org');
    expect(a.answers.map((r) => [r.name, r.ttl, r.address])).toEqual([['WWW.example.org.', 60, '192.0.2.80']]);
    expect(a.flags.aa).toBe(true);
    expect((await s.ask('files.example.org', QTYPE.AAAA)).answers.map((r) => r.address)).toEqual(['2001:db8::10']);
    expect((await s.ask('10.2.0.192.in-addr.arpa', QTYPE.PTR)).answers.map((r) => r.target)).toEqual([
      'files.example.org.',
      'files.',
    ]);
    // A name it has, with another type: NODATA, not passed on.
    const mx = await s.ask('www.example.org', QTYPE.MX);
    expect([mx.flags.rcode, mx.answers.length]).toEqual([RCODE.NOERROR, 0]);
    expect(s.forwarded()).toBe(0);
  });

  it('passes a name it does not have on with fallthrough, and answers SERVFAIL without, as CoreDNS', async () => {
    const through = stageWith('hosts {\n 192.0.2.80 www.example.org\n fallthrough\n}');
    expect((await through.ask('other.example.org')).flags.rcode).toBe(RCODE.NXDOMAIN);
    expect(through.forwarded()).toBe(1);
    const closed = stageWith('hosts {\n 192.0.2.80 www.example.org\n}');
    expect((await closed.ask('other.example.org')).flags.rcode).toBe(RCODE.SERVFAIL);
    expect(closed.forwarded()).toBe(0);
  });

  it('answers only in its zones, and makes no PTR with no_reverse', async () => {
    const s = stageWith('hosts /etc/hosts example.org {\n no_reverse\n}');
    await s.ask('www.example.net');
    expect(s.forwarded()).toBe(1);
    expect((await s.ask('10.2.0.192.in-addr.arpa', QTYPE.PTR)).flags.rcode).toBe(RCODE.NXDOMAIN);
    expect(s.forwarded()).toBe(2);
  });
});
