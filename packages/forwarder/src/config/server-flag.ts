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
