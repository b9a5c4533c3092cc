import type { Buffer } from 'node:buffer';
import {
  buildQueryMessage,
  createQueryPipeline,
  encodeMessage,
  QCLASS,
  QTYPE,
  type QueryContext,
  RCODE,
} from '@cluster-dns/wire';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { createAnswerLane } from './answer-lane.js';
import { createRecordBuilderMetrics } from './metrics.js';
import { createTestZone, group, svc } from './test-zone.js';
import type { ZoneRequest } from './zone-stage.js';

const UDP: QueryContext = { transport: 'udp', remoteAddress: '127.0.0.1', remotePort: 5000, family: 4 };
const PAYLOAD = 1232;

type QueryOptions = Parameters<typeof buildQueryMessage>[3] & { cd?: boolean };
const raw = (name: string, type: number = QTYPE.A, options: QueryOptions = {}) => {
  const message = encodeMessage(buildQueryMessage(0x5eed, name, type, options));
  if (options.cd) message[3] = (message[3] as number) | 0x10;
  return message;
};

/**
 * The record-builder's two ways to a ready answer, side by side without sockets: the express lane,
 * and the query pipeline with the zone, transfer and answer stages, each counting into its own
 * metrics registry as record-builder.ts wires them.
 */
function twoWays() {
  const t = createTestZone();
  t.state.upsertService(
    svc('shop', 'web', { clusterIPs: ['10.96.0.20'], ports: [{ name: 'http', port: 80, protocol: 'tcp' }] }),
  );
  t.state.upsertService(svc('data', 'big', { kind: 'headless' }));
  t.state.upsertGroup(
    group(
      'data',
      'big',
      Array.from({ length: 40 }, (_, i) => ({ ip: `10.244.0.${i + 1}` })),
    ),
  );
  let ready = true;
  const wholeRegistry = new Registry();
  const whole = createRecordBuilderMetrics(wholeRegistry);
  const pipeline = createQueryPipeline({
    handle: t.responder.handle,
    recursionAvailable: false,
    udpPayloadBytes: PAYLOAD,
    observe: (outcome) => {
      const zone = (outcome.request as ZoneRequest | undefined)?.zone;
      whole.observeQuery(outcome, zone === undefined || zone === 'cluster.local.' ? 'auth' : 'reverse');
    },
  });
  const laneRegistry = new Registry();
  const laneMetrics = createRecordBuilderMetrics(laneRegistry);
  const lane = createAnswerLane({
    cache: t.responder.cache,
    isReady: () => ready,
    udpPayloadBytes: PAYLOAD,
    count: laneMetrics.countAnswered,
  });
  return {
    lane,
    slow: (query: Buffer) => pipeline(query, UDP) as Buffer,
    setReady: (on: boolean) => {
      ready = on;
      t.setReady(on);
    },
    /** The per-query series of a registry, as scraped. */
    series: async (which: 'lane' | 'whole') => {
      const text = await (which === 'lane' ? laneRegistry : wholeRegistry).metrics();
      return text.split('\n').filter((l) => /^(skydns_skydns_dns_|kubedns_)/.test(l) && !l.includes('_created'));
    },
  };
}

const NAMES: Array<[string, number]> = [
  ['web.shop.svc.cluster.local', QTYPE.A],
  ['_http._tcp.web.shop.svc.cluster.local', QTYPE.SRV],
  ['big.data.svc.cluster.local', QTYPE.A], // 40 records: truncated for a client without EDNS
  ['nope.shop.svc.cluster.local', QTYPE.A], // NXDOMAIN
  ['web.shop.svc.cluster.local', QTYPE.AAAA], // NODATA
  ['20.0.96.10.in-addr.arpa', QTYPE.PTR], // the reverse zone
];

describe("the record-builder's express lane (ready answers before the pipeline)", () => {
  it('answers a ready answer with the very bytes the whole way answers, whatever the EDNS, flags or size', () => {
    const ways = twoWays();
    for (const [name, type] of NAMES) ways.slow(raw(name, type));
    let answered = 0;
    for (const [name, type] of NAMES)
      for (const edns of [undefined, { udpSize: 512 }, { udpSize: 1232 }, { udpSize: 4096, dnssecOk: true }])
        for (const flags of [{}, { rd: false }, { cd: true }]) {
          const query = raw(name, type, { edns, ...flags });
          const what = `${name} ${type} ${JSON.stringify({ edns, ...flags })}`;
          const fast = ways.lane(query, 4, '127.0.0.1');
          expect(fast, what).toBeDefined();
          expect((fast as Buffer).equals(ways.slow(query)), what).toBe(true);
          answered++;
        }
    expect(answered).toBe(72);
    expect(((ways.lane(raw('big.data.svc.cluster.local'), 4, '127.0.0.1') as Buffer)[2] as number) & 0x02).toBe(0x02);
  });

  it('leaves to the pipeline what only the zone stage or a build may answer', () => {
    const ways = twoWays();
    ways.slow(raw('web.shop.svc.cluster.local'));
    const passed: Array<[string, Buffer]> = [
      ['a name in another case', raw('WEB.shop.svc.cluster.local')],
      ['an answer not built yet', raw('web.shop.svc.cluster.local', QTYPE.SRV)],
      ['a name outside our zones', raw('example.org')],
      ['class CH', raw('web.shop.svc.cluster.local', QTYPE.A, { qclass: QCLASS.CH })],
      ['a zone transfer', raw('cluster.local', QTYPE.AXFR)],
    ];
    for (const [what, query] of passed) expect(ways.lane(query, 4, '127.0.0.1'), what).toBeUndefined();
    // Not ready (the lists are not in): the zone stage's SERVFAIL, never a ready answer.
    ways.setReady(false);
    expect(ways.lane(raw('web.shop.svc.cluster.local'), 4, '127.0.0.1')).toBeUndefined();
    expect((ways.slow(raw('web.shop.svc.cluster.local'))[3] as number) & 0x0f).toBe(RCODE.SERVFAIL);
  });

  it('counts an answer as the pipeline counts one: requests, sizes, errors and the reverse split', async () => {
    // The same queries once each: through the lane (after a warm-up its registry does not see),
    // and the whole way on a fresh zone.
    const lane = twoWays();
    const whole = twoWays();
    for (const [name, type] of NAMES) lane.slow(raw(name, type));
    for (const [name, type] of NAMES) {
      expect(lane.lane(raw(name, type), 4, '127.0.0.1')).toBeDefined();
      whole.slow(raw(name, type));
    }
    const counted = await lane.series('lane');
    expect(counted).toEqual(await whole.series('whole'));
    expect(counted.some((l) => l.includes('system="reverse"'))).toBe(true);
    expect(counted.some((l) => l.includes('cause="nxdomain"'))).toBe(true);
  });
});
