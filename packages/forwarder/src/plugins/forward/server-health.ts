import type { HostPort } from '@cluster-dns/runtime';
import type { RouteUpstream } from '../../config/server-flag.js';

/** One server's health, as CoreDNS's forward keeps it per proxy. */
interface Health {
  /** Failures in a row (a timeout, a refused connection; not an rcode). */
  fails: number;
  down: boolean;
  probe: ReturnType<typeof setInterval> | undefined;
}

/**
 * A Corefile forward's `max_fails` and `health_check` (coredns/coredns plugin/forward): a server
 * that failed `maxFails` times in a row is marked down, asked after every server that is up, and
 * probed every `healthCheckMs` (a `. IN NS` query, or the `domain` given, with or without RD) until
 * it answers anything, when it is up again. With every server down, they are all asked anyway in
 * their order (CoreDNS picks one at random), or, with `failfast_all_unhealthy_upstreams`, none.
 */
export class ServerHealth {
  private readonly servers = new Map<string, Health>();
  /** Probes sent, and servers marked down, since the start (for /metrics). */
  readonly counts = { probes: 0, probeFailures: 0, markedDown: 0 };

  constructor(
    /** Sends the health question to a server; resolves true when it answered at all. */
    private readonly probe: (server: HostPort, upstream: RouteUpstream) => Promise<boolean>,
  ) {}

  private health(id: string): Health {
    let h = this.servers.get(id);
    if (!h) {
      h = { fails: 0, down: false, probe: undefined };
      this.servers.set(id, h);
    }
    return h;
  }

  isDown(id: string): boolean {
    return this.servers.get(id)?.down ?? false;
  }

  /** A server answered: its failures start again from none. */
  succeeded(id: string): void {
    const h = this.servers.get(id);
    if (h) h.fails = 0;
  }

  /** A server failed (no answer): down once it has failed `maxFails` times in a row. */
  failed(id: string, server: HostPort, upstream: RouteUpstream): void {
    if (upstream.maxFails === 0) return;
    const h = this.health(id);
    h.fails++;
    if (h.down || h.fails < upstream.maxFails) return;
    h.down = true;
    this.counts.markedDown++;
    const check = () => {
      this.counts.probes++;
      void this.probe(server, upstream).then((ok) => {
        if (!ok) {
          this.counts.probeFailures++;
          return;
        }
        h.down = false;
        h.fails = 0;
        if (h.probe) clearInterval(h.probe);
        h.probe = undefined;
      });
    };
    h.probe = setInterval(check, Math.max(upstream.healthCheckMs, 100));
    h.probe.unref();
  }

  /** `servers` in the order to ask them: those up first, in their order, then those down. */
  ordered(servers: readonly HostPort[], idOf: (s: HostPort) => string): readonly HostPort[] {
    if (this.servers.size === 0) return servers;
    const up = servers.filter((s) => !this.isDown(idOf(s)));
    return up.length === servers.length ? servers : [...up, ...servers.filter((s) => this.isDown(idOf(s)))];
  }

  /** Whether every one of `servers` is down. */
  allDown(servers: readonly HostPort[], idOf: (s: HostPort) => string): boolean {
    return servers.length > 0 && servers.every((s) => this.isDown(idOf(s)));
  }

  /** Stops every probe (at shutdown). */
  close(): void {
    for (const h of this.servers.values()) if (h.probe) clearInterval(h.probe);
  }
}
