import http, { type IncomingMessage, type RequestListener } from 'node:http';
import type { AddressInfo, ListenOptions } from 'node:net';
import { bindHint, bindReason, bindTarget, ClusterDnsError } from '@cluster-dns/wire';

export type HttpRoute = (
  request: IncomingMessage,
  url: URL,
) =>
  | { status: number; body: string; contentType?: string }
  | Promise<{ status: number; body: string; contentType?: string }>;

export interface HttpListener {
  readonly host: string;
  readonly port: number;
  /** Stops accepting, lets requests in flight finish (bounded by `deadlineMs`), then closes. */
  close(options?: { deadlineMs?: number }): Promise<void>;
}

/** An HTTP listener that could not bind, naming the address, the flags that set it and the system's reason. */
export class HttpBindError extends ClusterDnsError {
  constructor(
    readonly address: string,
    cause: unknown,
    flags?: string,
  ) {
    const why = bindReason(cause);
    super('HTTP_BIND', `cannot listen on ${bindTarget(`${address}/http`, flags)}: ${why}`, {
      cause,
      hint: bindHint(why),
    });
  }
}

const TEXT = 'text/plain; charset=utf-8';

/**
 * A request listener answering GET and HEAD on each path of `routes`, 404 elsewhere, 500 if a
 * route throws. Paths match as express's do (any case, a trailing slash allowed). Plain node:http:
 * a process that serves only tables (probes, /metrics) loads none of express's dependencies, which
 * were a quarter of the forwarder's bundle and ~3 MiB of each thread's heap.
 */
export function routesListener(routes: Record<string, HttpRoute>): RequestListener {
  const table = new Map(Object.entries(routes).map(([path, route]) => [path.toLowerCase(), route]));
  return (request, response) => {
    const send = (status: number, body: string, contentType = TEXT) => {
      const bytes = Buffer.from(body);
      response.writeHead(status, { 'content-type': contentType, 'content-length': bytes.length });
      response.end(request.method === 'HEAD' ? undefined : bytes);
    };
    let url: URL;
    try {
      url = new URL(request.url ?? '/', 'http://localhost');
    } catch {
      return send(400, 'bad request\n');
    }
    const path = url.pathname.length > 1 && url.pathname.endsWith('/') ? url.pathname.slice(0, -1) : url.pathname;
    const route = request.method === 'GET' || request.method === 'HEAD' ? table.get(path.toLowerCase()) : undefined;
    if (!route) return send(404, '404 page not found\n');
    Promise.resolve()
      .then(() => route(request, url))
      .then(
        (out) => send(out.status, out.body, out.contentType),
        (error: unknown) => send(500, `error: ${(error as Error).message}\n`),
      );
  };
}

/**
 * Serves a request listener (the sidecar's express app) or a table of GET routes, for probes,
 * metrics and debug dumps. Port 0 picks a free one. A bind failure is an HttpBindError naming
 * `flags`, the flags that set host and port.
 */
export async function listenHttp(
  host: string,
  port: number,
  handler: RequestListener | Record<string, HttpRoute>,
  /** `reusePort`: SO_REUSEPORT (Node 22.12+), for an instance that takes over from another on the same port. */
  options: { flags?: string; reusePort?: boolean } = {},
): Promise<HttpListener> {
  const app = typeof handler === 'function' ? handler : routesListener(handler);
  // Not app.listen: express 5 calls its callback on a bind error too, as if it had listened.
  const server = http.createServer(app);
  await new Promise<void>((resolve, reject) => {
    const failed = (error: Error) => reject(new HttpBindError(`${host}:${port}`, error, options.flags));
    server.once('error', failed);
    server.listen({ port, host, ...(options.reusePort ? { reusePort: true } : {}) } as ListenOptions, () => {
      server.off('error', failed);
      resolve();
    });
  });
  server.keepAliveTimeout = 5000;
  let closing: Promise<void> | undefined;
  return {
    host,
    port: (server.address() as AddressInfo).port,
    close: (options = {}) => {
      closing ??= new Promise<void>((resolve) => {
        const timer = setTimeout(() => server.closeAllConnections(), options.deadlineMs ?? 2000);
        timer.unref();
        server.close(() => {
          clearTimeout(timer);
          resolve();
        });
        server.closeIdleConnections();
      });
      return closing;
    },
  };
}
