import type { Buffer } from 'node:buffer';
import { createSilentLogger } from '@cluster-dns/runtime';
import { decodeMessage, encodeMessage, QCLASS, QTYPE, toFqdn, type UpstreamTcp } from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import type { RouteTable } from '../../config/route-table.js';
import { ReplyCache } from '../cache/cache.js';
import { createZoneTransfers } from './zone-transfers.js';

const Z = toFqdn('cluster.local');
const SERVER = { host: '10.96.0.11', port: 53 };

/** A reply to `query` holding one SOA of `serial`: an SOA answer, or an IXFR's "up to date". */
const soaReply = (query: Buffer, serial: number) => {
  const q = decodeMessage(query);
  return encodeMessage({
    id: q.id,
    flags: { qr: true, opcode: 0, aa: true, tc: false, rd: false, ra: false, ad: false, cd: false, rcode: 0 },
    questions: q.questions,
    answers: [
      {
        name: Z,
        type: QTYPE.SOA,
        class: QCLASS.IN,
        ttl: 30,
        soa: {
          primary: `ns.dns.${Z}`,
          admin: `hostmaster.${Z}`,
          serial,
          refresh: 0,
          retry: 0,
          expiration: 0,
          minimum: 5,
        },
      },
    ],
    authorities: [],
    additionals: [],
  });
};

describe('zone transfers on a force_tcp route (node-local mode)', () => {
  it('asks the SOA and fetches the IXFR on the route’s kept connections, not on connections of their own', async () => {
    const calls: string[] = [];
    const kept = {
      exchange: async (server: { host: string }, query: Buffer) => {
        calls.push(`exchange ${server.host} ${decodeMessage(query).questions[0]?.type}`);
        return soaReply(query, 7);
      },
      stream: async (server: { host: string }, query: Buffer, options: { onMessage(m: Buffer): boolean }) => {
        calls.push(`stream ${server.host} ${decodeMessage(query).questions[0]?.type}`);
        options.onMessage(soaReply(query, 7));
      },
    } as unknown as UpstreamTcp;
    const route = { kind: 'server', domain: Z, servers: [SERVER], forceTcp: true, id: 'r' };
    const sync = createZoneTransfers({
      routes: () => ({ routeFor: () => route }) as unknown as RouteTable,
      cache: new ReplyCache(100),
      options: { forwardDeadlineMs: 1000, upstreamTimeoutMs: 500 },
      notifyFromAnySource: true,
      upstreamTcp: kept,
      log: createSilentLogger(),
    });
    expect(await sync.notify(Z, '10.244.0.5')).toBe('accepted');
    // Entering push mode: the serial (SOA), then what changed since (IXFR), both on kept connections.
    expect(calls).toEqual([`exchange ${SERVER.host} ${QTYPE.SOA}`, `stream ${SERVER.host} ${QTYPE.IXFR}`]);
    expect(sync.zones()).toEqual([{ zone: Z, serial: 7 }]);
  });
});
