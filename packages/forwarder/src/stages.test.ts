import { createSilentLogger } from '@cluster-dns/runtime';
import { chainStages, OPCODE, QCLASS, QTYPE, RCODE, toFqdn } from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import { ChaosStage } from './chaos-stage.js';
import { LoopGuardStage } from './loop-guard-stage.js';
import { NotifyStage } from './notify-stage.js';
import { RouteTable } from './route-table.js';
import { parseServerFlag } from './server-flag.js';
import { askThrough } from './test-chain.js';
import { TransferRelayStage } from './transfer-relay-stage.js';
import type { ZoneSync } from './zone-sync.js';

// The small stages of the forwarder's chain, each in front of an end that says it was reached.
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
    const stage = new ChaosStage(stats);
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
    const ask = askThrough(chainStages([new ChaosStage(stats)], end));
    await expect(ask('hits.bind', QTYPE.TXT)).rejects.toThrow(/no single reply/);
    expect(reached).toEqual(['hits.bind.']);
  });
});

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
