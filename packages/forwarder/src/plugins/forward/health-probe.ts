import type { Buffer } from 'node:buffer';
import type { HostPort } from '@cluster-dns/runtime';
import { type ExchangeOptions, FLAG, QCLASS, QTYPE } from '@cluster-dns/wire';
import type { RouteUpstream } from '../../config/server-flag.js';
import type { TlsUpstreams } from './tls-upstreams.js';
import { buildUpstreamQuery } from './upstream.js';

type Exchange = (server: HostPort, query: Buffer, options: ExchangeOptions) => Promise<Buffer>;

/** How long a health probe waits (CoreDNS's health check: 1 s). */
const PROBE_TIMEOUT_MS = 1000;

/**
 * CoreDNS's forward health check: `. IN NS` (or `health_check … domain NAME`), with RD unless
 * `no_rec`, over the route's transport; any reply at all is a server that is up.
 */
export function healthProbe(deps: { exchangeUdp: Exchange; tls: TlsUpstreams }) {
  return async (server: HostPort, upstream: RouteUpstream): Promise<boolean> => {
    const query = buildUpstreamQuery({
      name: upstream.healthDomain,
      qtype: QTYPE.NS,
      qclass: QCLASS.IN,
      dnssecOk: false,
      checkingDisabled: false,
    });
    if (!upstream.healthRecursionDesired) query.writeUInt16BE(query.readUInt16BE(2) & ~FLAG.RD, 2);
    const exchange = deps.tls.exchangeFor(upstream) ?? deps.exchangeUdp;
    try {
      await exchange(server, query, { timeoutMs: PROBE_TIMEOUT_MS });
      return true;
    } catch {
      // No reply in time: still down; the next probe asks again.
      return false;
    }
  };
}
