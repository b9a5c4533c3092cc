import { buildQueryMessage, chainStages, encodeMessage, parseQuery, QTYPE, RCODE, toFqdn } from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import type { ZoneView } from './answer-builder.js';
import { ClusterState } from './cluster-state.js';
import { TransferStage } from './transfer-stage.js';
import { type ZoneRequest, ZoneStage } from './zone-stage.js';

const zone = toFqdn('cluster.local');
const reverse = [toFqdn('in-addr.arpa'), toFqdn('ip6.arpa')];
const view: ZoneView = {
  zone,
  reverseZones: reverse,
  ttlSeconds: 30,
  pods: 'disabled',
  dnsService: undefined,
  state: new ClusterState({ zone, reverseZones: reverse, ttlSeconds: 30 }),
};

/** A stage in front of an end that records the requests it gets; the reply's rcode, or 'passed'. */
function through(stages: Array<ZoneStage | TransferStage>, remote = '127.0.0.1') {
  const reached: ZoneRequest[] = [];
  const chain = chainStages<ZoneRequest>(stages, (request) => {
    reached.push(request);
    return undefined;
  });
  const ask = (name: string, type: number = QTYPE.A, transport: 'udp' | 'tcp' = 'udp') => {
    const request: ZoneRequest = {
      query: parseQuery(encodeMessage(buildQueryMessage(1, name, type))),
      context: { transport, remoteAddress: remote, remotePort: 1, family: 4 },
      limitBytes: 512,
      udpPayloadBytes: 1232,
    };
    const reply = chain(request);
    return Buffer.isBuffer(reply) ? reply.readUInt16BE(2) & 0xf : reply === undefined ? 'passed' : 'lazy';
  };
  return { ask, reached };
}

describe('the record-builder’s zone stage', () => {
  it('refuses names outside its zones, notes the zone of the rest, and passes them on', () => {
    const t = through([new ZoneStage(view, () => true)]);
    expect(t.ask('www.example.org')).toBe(RCODE.REFUSED);
    expect(t.ask('web.shop.svc.cluster.local')).toBe('passed');
    expect(t.ask('9.2.0.192.in-addr.arpa', QTYPE.PTR)).toBe('passed');
    expect(t.reached.map((r) => r.zone)).toEqual([zone, reverse[0]]);
  });

  it('answers SERVFAIL until ready (never NXDOMAIN for a name that may exist), and NXDOMAIN for an escaped octet', () => {
    let ready = false;
    const t = through([new ZoneStage(view, () => ready)]);
    expect(t.ask('web.shop.svc.cluster.local')).toBe(RCODE.SERVFAIL);
    ready = true;
    expect(t.ask('we\\032b.shop.svc.cluster.local')).toBe(RCODE.NXDOMAIN);
    expect(t.reached).toHaveLength(0);
  });
});

describe('the record-builder’s transfer stage', () => {
  const stages = [new ZoneStage(view, () => true), new TransferStage(view, (a) => a === '127.0.0.1')];

  it('refuses a transfer to an address not allowed, and AXFR over UDP', () => {
    expect(through(stages, '192.0.2.9').ask('cluster.local', QTYPE.AXFR, 'tcp')).toBe(RCODE.REFUSED);
    expect(through(stages).ask('cluster.local', QTYPE.AXFR, 'udp')).toBe(RCODE.REFUSED);
  });

  it('streams an AXFR over TCP to an allowed address, and passes other questions on', () => {
    const t = through(stages);
    expect(t.ask('cluster.local', QTYPE.AXFR, 'tcp')).toBe('lazy');
    expect(t.ask('cluster.local', QTYPE.SOA)).toBe('passed');
  });
});
