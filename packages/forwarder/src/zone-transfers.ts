import type { Logger } from '@cluster-dns/runtime';
import {
  buildIxfrQuery,
  type Fqdn,
  QTYPE,
  queryDns,
  randomQueryId,
  transferTcp,
  ZoneChangeReader,
  ZoneTransferError,
} from '@cluster-dns/wire';
import type { ReplyCache } from './cache.js';
import { type RouteTable, serverText } from './route-table.js';
import { createZoneSync, type ZoneSync, type ZoneSyncDeps } from './zone-sync.js';

/**
 * Zone sync (zone-sync.ts) on the network: a zone's server is the first server of its route, NOTIFY
 * is taken from any server of the route, changes come by IXFR over TCP and the serial by a plain SOA
 * query, and what changed is dropped from `cache`.
 */
export function createZoneTransfers(deps: {
  routes(): RouteTable;
  cache: ReplyCache;
  options: { forwardDeadlineMs: number; upstreamTimeoutMs: number };
  /** NOTIFY from anywhere (node-local mode): it only makes us fetch from the zone's own server. */
  notifyFromAnySource?: boolean;
  /** Told each change applied (workers hand it to the other workers' caches). */
  changed?: ZoneSyncDeps['changed'];
  log: Logger;
}): ZoneSync {
  const { cache, options } = deps;
  const routeOf = (zone: Fqdn) => deps.routes().routeFor(zone);
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
    transfer: async (server, zone, serial) => {
      const reader = new ZoneChangeReader();
      await transferTcp(server, buildIxfrQuery(randomQueryId(), zone, serial), {
        timeoutMs: options.forwardDeadlineMs,
        onMessage: (m) => reader.push(m),
      });
      if (!reader.result) throw new ZoneTransferError(`IXFR of ${zone} from ${serverText(server)} ended early`);
      return reader.result;
    },
    soaSerial: async (server, zone) => {
      const reply = await queryDns(server, zone, QTYPE.SOA, { timeoutMs: options.upstreamTimeoutMs, rd: false });
      const serial = reply.answers.find((r) => r.type === QTYPE.SOA)?.soa?.serial;
      if (serial === undefined) throw new ZoneTransferError(`${serverText(server)} gave no SOA for ${zone}`);
      return serial;
    },
    evictNames: (names) => cache.evictNames(names),
    flushZone: (zone) => cache.flushZone(zone),
    ...(deps.changed ? { changed: deps.changed } : {}),
    // Node-local mode: the replica that notified may be ahead of the one the fetch reached.
    ...(deps.notifyFromAnySource ? { recheckAfterMs: [100, 400] } : {}),
    log: deps.log,
  });
}
