import { randomBytes } from 'node:crypto';
import type { HostPort, Logger } from '@cluster-dns/runtime';
import { exchangeRaw, type Fqdn, QTYPE, toFqdn } from '@cluster-dns/wire';
import { serverText } from '../../config/route-table.js';
import { buildUpstreamQuery } from '../forward/upstream.js';

/**
 * --dns-loop-detect, the dnsmasq way: send each upstream a TXT query for a unique random name; if
 * that query comes back to us, the upstream forwards to us and would loop. Such a server is
 * disabled (skipped by every route) and logged. Only the probe decides: an upstream on our port
 * is not a loop merely because we listen on 0.0.0.0 (the node's resolver at 10.0.0.2:53, say).
 */
export function createLoopDetector(deps: { log: Logger; disabled: Set<string> }) {
  const probes = new Map<Fqdn, string>();
  return {
    /** Probes are out: until then no query can be one. */
    outstanding: () => probes.size > 0,
    isProbe(name: Fqdn): boolean {
      // Every query passes here; only while probes are out is there anything to look up.
      if (probes.size === 0) return false;
      const server = probes.get(name);
      if (server === undefined) return false;
      if (!deps.disabled.has(server)) {
        deps.disabled.add(server);
        deps.log.error('forwarding loop detected: upstream sends our queries back to us; disabled', { server });
      }
      return true;
    },
    async check(servers: readonly HostPort[]): Promise<void> {
      await Promise.all(
        servers.map(async (server) => {
          const name = toFqdn(`${randomBytes(8).toString('hex')}.loop-check.cluster-dns.invalid`);
          probes.set(name, serverText(server));
          try {
            await exchangeRaw(
              server,
              buildUpstreamQuery({ name, qtype: QTYPE.TXT, qclass: 1, dnssecOk: false, checkingDisabled: false }),
              { timeoutMs: 1000 },
            );
          } catch {
            // A server that does not answer the probe is not looping; its failures show in servers.bind.
          } finally {
            setTimeout(() => probes.delete(name), 5000).unref();
          }
        }),
      );
    },
  };
}
