import type { RequestListener } from 'node:http';
import { type DnsListener, type ListenDnsOptions, listenDns } from '@cluster-dns/wire';
import { type HttpListener, type HttpRoute, listenHttp } from '../http-listener.js';
import { CloseStack, sleep } from '../lifecycle.js';
import type { Logger } from '../logger.js';

export interface ServerCoreOptions {
  log: Logger;
  /** After SIGTERM: readiness fails and queries are still answered this long, then listeners close. */
  lameduckMs: number;
  /**
   * `untilReady`: the lameduck is waited only once the server has been ready (a server never
   * ready was in no Service's endpoints: no traffic to wait out). `always`: a server with no
   * readiness of its own (the forwarder) always waits.
   */
  lameduck: 'untilReady' | 'always';
}

/**
 * The one server every process assembles its chains on, as CoreDNS's core/dnsserver is: it binds
 * the DNS listeners and the HTTP endpoints it is given, holds readiness, and at shutdown fails
 * readiness, waits out the lameduck still answering, then closes everything in the reverse order
 * of opening (DNS listeners draining their queries in flight). Timers and other things to stop
 * are pushed on `closers`, so they stop in that order too. The shells only build chains and
 * hand them here.
 */
export class ServerCore {
  readonly closers = new CloseStack();
  private readyNow = false;
  private drainingNow = false;

  constructor(private readonly options: ServerCoreOptions) {}

  /** Binds a DNS listener (UDP and TCP); it drains for `drainMs` at shutdown. */
  async listenDns(name: string, listen: ListenDnsOptions, drainMs: number): Promise<DnsListener> {
    const listener = await listenDns(listen);
    this.closers.push(name, () => listener.close({ deadlineMs: drainMs }));
    return listener;
  }

  /**
   * Binds an HTTP endpoint (metrics, health, readiness): routes, or a whole app (the sidecar's).
   * `drainMs`: how long a request in flight (a scrape, a kubelet probe) may finish at shutdown.
   */
  async listenHttp(
    name: string,
    host: string,
    port: number,
    routes: Record<string, HttpRoute> | RequestListener,
    options: { flags?: string; reusePort?: boolean; drainMs?: number } = {},
  ): Promise<HttpListener> {
    const listener = await listenHttp(host, port, routes, options);
    const deadlineMs = options.drainMs;
    this.closers.push(name, () => listener.close(deadlineMs === undefined ? undefined : { deadlineMs }));
    return listener;
  }

  /** From now on readiness passes, until shutdown. */
  markReady(): void {
    this.readyNow = true;
  }

  /** Ready once, shutting down or not: whether to answer (the lameduck still answers). */
  get answering(): boolean {
    return this.readyNow;
  }

  /** Ready and not shutting down: what /readiness, /ready and a lameduck /health say. */
  isReady(): boolean {
    return this.readyNow && !this.drainingNow;
  }

  get draining(): boolean {
    return this.drainingNow;
  }

  /** Fails readiness, waits out the lameduck, closes in reverse order. Safe to call twice. */
  async shutdown(): Promise<void> {
    if (!this.drainingNow) {
      this.drainingNow = true;
      if (this.options.lameduck === 'always' || this.readyNow) {
        // A server without readiness (the forwarder) has none to fail: each says what it does.
        const msg =
          this.options.lameduck === 'always'
            ? 'lameduck: still answering'
            : 'lameduck: readiness failing, still answering';
        this.options.log.info(msg, { lameduckMs: this.options.lameduckMs });
        await sleep(this.options.lameduckMs);
      }
    }
    await this.closers.close(this.options.log);
  }
}
