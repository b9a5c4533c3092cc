import { Buffer } from 'node:buffer';
import type { Logger } from '@cluster-dns/runtime';
import {
  buildIxfrQuery,
  buildQueryMessage,
  decodeMessage,
  encodeMessage,
  type Fqdn,
  QTYPE,
  queryDns,
  randomQueryId,
  transferTcp,
  type UpstreamTcp,
  ZoneChangeReader,
  ZoneTransferError,
} from '@cluster-dns/wire';
import { type RouteTable, serverText } from '../../config/route-table.js';
import type { AnswerCache } from '../cache/cache.js';
import { createZoneSync, type ZoneSync } from './zone-sync.js';

/**
 * Zone sync (zone-sync.ts) on the network: a zone's server is the first server of its route, NOTIFY
 * is taken from any server of the route, changes come by IXFR over TCP and the serial by a plain SOA
 * query, and what changed is dropped from `cache`. On a `force_tcp` route (node-local mode) both go
 * on the route's kept connections: a node cache then reads the one cluster DNS Pod its connection
 * reached, not whichever Pod kube-proxy picks per fetch, and pays no TCP handshake per fetch; when
 * that Pod goes, the position its copy holds lets the next answer from what changed.
 */
export function createZoneTransfers(deps: {
  routes(): RouteTable;
  cache: AnswerCache;
  options: { forwardDeadlineMs: number; upstreamTimeoutMs: number };
  /** NOTIFY from anywhere (node-local mode): it only makes us fetch from the zone's own server. */
  notifyFromAnySource?: boolean;
  /** Told each change applied (workers hand it to the other workers' caches). */
  /** The kept connections of `force_tcp` routes (the forward stage's). */
  upstreamTcp?: UpstreamTcp;
  log: Logger;
}): ZoneSync {
  const { cache, options } = deps;
  const routeOf = (zone: Fqdn) => deps.routes().routeFor(zone);
  const keptFor = (zone: Fqdn) => (routeOf(zone).forceTcp ? deps.upstreamTcp : undefined);
  return createZoneSync({
    serverFor: (zone) => {
      const route = routeOf(zone);
      return route.kind === 'local' ? undefined : route.servers[0];
    },
    allowedSources: (zone) => {
      const route = routeOf(zone);
      // From anyone only for a zone that is a route's own, to that route's server.
      if (deps.notifyFromAnySource) return route.kind === 'server' && route.domain === zone ? undefined : [];
      return route.servers.map((s) => s.host);
    },
    transfer: async (server, zone, serial, position) => {
      const reader = new ZoneChangeReader();
      // The position empty until the first reply gives one: an empty option asks for it.
      const query = buildIxfrQuery(randomQueryId(), zone, serial, {
        programmingTimes: true,
        position: position ?? Buffer.alloc(0),
      });
      const onMessage = (m: Buffer) => reader.push(m);
      const kept = keptFor(zone);
      if (kept) await kept.stream(server, query, { timeoutMs: options.forwardDeadlineMs, onMessage });
      else await transferTcp(server, query, { timeoutMs: options.forwardDeadlineMs, onMessage });
      if (!reader.result) throw new ZoneTransferError(`IXFR of ${zone} from ${serverText(server)} ended early`);
      return reader.result;
    },
    soaSerial: async (server, zone) => {
      const kept = keptFor(zone);
      const reply = kept
        ? decodeMessage(
            await kept.exchange(
              server,
              encodeMessage(buildQueryMessage(randomQueryId(), zone, QTYPE.SOA, { rd: false })),
              { timeoutMs: options.upstreamTimeoutMs },
            ),
          )
        : await queryDns(server, zone, QTYPE.SOA, { timeoutMs: options.upstreamTimeoutMs, rd: false });
      const serial = reply.answers.find((r) => r.type === QTYPE.SOA)?.soa?.serial;
      if (serial === undefined) throw new ZoneTransferError(`${serverText(server)} gave no SOA for ${zone}`);
      return serial;
    },
    evictNames: (names) => cache.evictNames(names),
    flushZone: (zone) => cache.flushZone(zone),
    // Node-local mode: the replica that notified may be ahead of the one the fetch reached.
    ...(deps.notifyFromAnySource ? { recheckAfterMs: [100, 400] } : {}),
    log: deps.log,
  });
}
