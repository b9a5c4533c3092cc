import { createSilentLogger } from '@cluster-dns/runtime';
import { chainStages, QTYPE, RCODE } from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import { RouteTable } from '../../config/route-table.js';
import { parseServerFlag } from '../../config/server-flag.js';
import { askThrough } from '../../testing/test-chain.js';
import type { ZoneSync } from '../notify/zone-sync.js';
import { TransferRelayStage } from './transfer-relay-stage.js';

// The stage in front of an end that notes the names that reached it.
const reached: string[] = [];
const end = (request: { query: { qname: string } }) => {
  reached.push(request.query.qname);
  return undefined;
};

describe('the transfer relay stage', () => {
  const routes = new RouteTable({
    rules: [parseServerFlag('/cluster.local/127.0.0.1#1'), parseServerFlag('198.51.100.1')],
    stubDomains: new Map(),
    upstreamNameservers: [],
    resolvConf: [],
  });
  const stage = new TransferRelayStage({
    routes: () => routes,
    allowed: (address) => address === '192.0.2.1',
    sync: {} as ZoneSync,
    timeoutMs: 1000,
    log: createSilentLogger(),
  });
  const ask = askThrough(chainStages([stage], end));
  const tcp = (remoteAddress: string) => ({
    transport: 'tcp' as const,
    remoteAddress,
    remotePort: 40000,
    family: 4 as const,
  });

  it('refuses a transfer over UDP, from outside --transfer-relay-from, of a name inside a zone, or of an upstream zone', async () => {
    reached.length = 0;
    expect((await ask('cluster.local', QTYPE.IXFR)).flags.rcode).toBe(RCODE.REFUSED);
    expect((await ask('cluster.local', QTYPE.AXFR, { context: tcp('192.0.2.9') })).flags.rcode).toBe(RCODE.REFUSED);
    expect((await ask('svc.cluster.local', QTYPE.IXFR, { context: tcp('192.0.2.1') })).flags.rcode).toBe(RCODE.REFUSED);
    expect((await ask('example.org', QTYPE.AXFR, { context: tcp('192.0.2.1') })).flags.rcode).toBe(RCODE.REFUSED);
    expect(stage.counts).toEqual({ relayed: 0, refused: 4, failed: 0 });
    // Queries go on.
    await ask('web.shop.svc.cluster.local', QTYPE.A, { context: tcp('192.0.2.1') }).catch(() => undefined);
    expect(reached).toEqual(['web.shop.svc.cluster.local.']);
  });

  it('answers SERVFAIL when the zone’s server does not answer the relayed transfer', async () => {
    const reply = await ask('cluster.local', QTYPE.AXFR, { context: tcp('192.0.2.1') });
    expect(reply.flags.rcode).toBe(RCODE.SERVFAIL);
    expect(stage.counts.failed).toBe(1);
  });
});
