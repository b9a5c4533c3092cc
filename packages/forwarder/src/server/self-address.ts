import os from 'node:os';
import type { HostPort } from '@cluster-dns/runtime';

const WILDCARDS = new Set(['0.0.0.0', '::']);

/** Addresses of this host's interfaces, loopback ranges included (127.0.0.0/8 answers on lo). */
function localAddresses(): Set<string> {
  const out = new Set<string>(['::1']);
  for (const list of Object.values(os.networkInterfaces())) for (const a of list ?? []) out.add(a.address);
  return out;
}

/**
 * Whether a server is this forwarder itself: our port, and an address we listen on (any local
 * one when we listen on a wildcard). Asking it would send every query round in a loop until the
 * deadline, so such a server is refused when the config names it (dnsmasq: "ignoring nameserver
 * … - local interface"). `port` is read at each call: with --port=0 it is known only once bound.
 */
export function createSelfCheck(listenAddresses: readonly string[], port: () => number): (server: HostPort) => boolean {
  const wildcard = listenAddresses.some((a) => WILDCARDS.has(a));
  return (server) => {
    const ours = port();
    if (ours === 0 || server.port !== ours) return false;
    if (listenAddresses.includes(server.host)) return true;
    if (!wildcard) return false;
    return server.host.startsWith('127.') || localAddresses().has(server.host);
  };
}
