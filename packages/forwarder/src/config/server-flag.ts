import { FlagError, type HostPort, parseHostPort } from '@cluster-dns/runtime';
import { type Fqdn, isValidName, ROOT, toFqdn } from '@cluster-dns/wire';
import type { RouteCache } from './cache-policy.js';

export type ServerPolicy = 'random' | 'round_robin' | 'sequential';

/** One `--server` value: servers for some domains, or plain upstreams when `domains` is empty. */
export interface ServerRule {
  readonly domains: readonly Fqdn[];
  /** Empty with domains: answer NXDOMAIN locally for them (dnsmasq's `--server=/d/`). */
  readonly servers: readonly HostPort[];
  /** Ask these servers over TCP only (CoreDNS's `force_tcp`). */
  readonly forceTcp?: boolean;
  /** The route's cache policy; the process's flags when unset. */
  readonly cache?: RouteCache;
  /**
   * Whether an NXDOMAIN (or REFUSED) here is asked of the upstreams again: unset, in reverse zones
   * only (kube-dns's way); true, in this domain whatever it is (a Corefile's `fallthrough`); false, never.
   */
  readonly fallThrough?: boolean;
  /** Which server is asked first (a Corefile forward's `policy`); in order when unset, as dnsmasq -o. */
  readonly policy?: ServerPolicy;
  /** A Corefile zone nothing forwards (a block of file or template only, a forward's `except`): SERVFAIL. */
  readonly unserved?: true;
  /** How its servers are asked beyond UDP and TCP: TLS, health, failover (a Corefile forward's options). */
  readonly upstream?: RouteUpstream;
}

/** A Corefile forward's options for how its servers are asked (plugins/forward). */
export interface RouteUpstream {
  /** DNS over TLS (RFC 7858) on kept connections: the name the servers' certificates must hold, and files. */
  readonly tls?: {
    readonly serverName: string | undefined;
    readonly ca: string | undefined;
    readonly cert: string | undefined;
    readonly key: string | undefined;
  };
  /** Failures in a row that mark a server down (asked last, probed until it answers); 0: never. */
  readonly maxFails: number;
  /** How often a server marked down is probed (`. IN NS`, or `domain`), and whether with RD. */
  readonly healthCheckMs: number;
  readonly healthRecursionDesired: boolean;
  readonly healthDomain: Fqdn;
  /** Rcodes that are asked of the next server too (beyond SERVFAIL and REFUSED). */
  readonly failover: readonly number[];
  /** SERVFAIL at once when every server is down (failfast_all_unhealthy_upstreams). */
  readonly failfast: boolean;
  /** How long a kept TCP or TLS connection may idle. */
  readonly expireMs: number;
  /** One server's wait (read_timeout); the forwarder's --upstream-timeout when unset. */
  readonly readTimeoutMs: number | undefined;
}

const EXPECTED = '/domain/ip[#port], /domain1/domain2/ip[#port], /domain/ (local only) or ip[#port]';

/** Parses dnsmasq's `--server` syntax. */
export function parseServerFlag(raw: string, flag = '--server'): ServerRule {
  if (!raw.startsWith('/')) return { domains: [], servers: [parseHostPort(raw, 53, flag)] };
  const parts = raw.split('/');
  // "/a/b/1.2.3.4" → ["", "a", "b", "1.2.3.4"]
  const server = parts.at(-1) as string;
  const domains = parts.slice(1, -1);
  if (domains.length === 0 || domains.some((d) => d === '' || !isValidName(d)))
    throw new FlagError(flag, raw, EXPECTED);
  const fqdns = domains.map((d) => toFqdn(d));
  if (fqdns.includes(ROOT)) throw new FlagError(flag, raw, EXPECTED);
  if (server === '') return { domains: fqdns, servers: [] };
  try {
    return { domains: fqdns, servers: [parseHostPort(server, 53, flag)] };
  } catch (error) {
    throw new FlagError(flag, raw, EXPECTED, { cause: error });
  }
}
