import type { Buffer } from 'node:buffer';
import { readFileSync } from 'node:fs';
import tls from 'node:tls';
import type { HostPort } from '@cluster-dns/runtime';
import { createUpstreamTcp, type ExchangeOptions, type UpstreamTcp } from '@cluster-dns/wire';
import type { RouteUpstream } from '../../config/server-flag.js';

type Exchange = (server: HostPort, query: Buffer, options: ExchangeOptions) => Promise<Buffer>;

/**
 * DNS over TLS to a Corefile forward's `tls://` servers (RFC 7858): one pool of kept, pipelined
 * connections per TLS setting (server name, CA, client certificate), each closed after `expire`
 * idle, as CoreDNS's forward keeps its. The certificate is checked against `tls_servername` (or
 * the server's `%name`, or else its address), with Node's roots unless a CA is given.
 */
export class TlsUpstreams {
  private readonly pools = new Map<string, UpstreamTcp>();

  /** The exchange for one route's TLS setting: its pool, made at its first question. */
  exchangeFor(upstream: RouteUpstream): Exchange | undefined {
    const settings = upstream.tls;
    if (!settings) return undefined;
    const key = JSON.stringify([settings, upstream.expireMs]);
    let pool = this.pools.get(key);
    if (!pool) {
      const read = (path: string | undefined) => (path === undefined ? undefined : readFileSync(path));
      const secure = {
        ca: read(settings.ca),
        cert: read(settings.cert),
        key: read(settings.key),
      };
      pool = createUpstreamTcp({
        idleTimeoutMs: upstream.expireMs,
        connect: (server) =>
          tls.connect({
            host: server.host,
            port: server.port,
            // SNI and the name checked: the forward's server name, else the address (its IP SANs).
            ...(settings.serverName ? { servername: settings.serverName } : {}),
            ...(secure.ca ? { ca: secure.ca } : {}),
            ...(secure.cert ? { cert: secure.cert } : {}),
            ...(secure.key ? { key: secure.key } : {}),
          }),
      });
      this.pools.set(key, pool);
    }
    const chosen = pool;
    return (server, query, options) => chosen.exchange(server, query, options);
  }

  /** Connections open now, over every pool. */
  connections(): number {
    let n = 0;
    for (const pool of this.pools.values()) n += pool.connections();
    return n;
  }

  close(): void {
    for (const pool of this.pools.values()) pool.close();
  }
}
