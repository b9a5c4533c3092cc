import http from 'node:http';
import type { AddressInfo, ListenOptions } from 'node:net';
import { bindHint, bindReason, bindTarget, ClusterDnsError } from '@cluster-dns/wire';
import express, { type Express, type Request } from 'express';

export type HttpRoute = (
  request: Request,
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

/** An express app answering GET on each path of `routes`, 404 elsewhere, 500 if a route throws. */
export function routesApp(routes: Record<string, HttpRoute>): Express {
  const app = express();
  app.disable('x-powered-by');
  for (const [path, route] of Object.entries(routes)) {
    app.get(path, async (req, res) => {
      try {
        const out = await route(req, new URL(req.originalUrl, 'http://localhost'));
        res
          .status(out.status)
          .type(out.contentType ?? 'text/plain; charset=utf-8')
          .send(out.body);
      } catch (error) {
        res
          .status(500)
          .type('text/plain; charset=utf-8')
          .send(`error: ${(error as Error).message}\n`);
      }
    });
  }
  app.use((_req, res) => {
    res.status(404).type('text/plain; charset=utf-8').send('404 page not found\n');
  });
  return app;
}

/**
 * Serves an express app (or a table of GET routes) for probes, metrics and debug dumps: the one
 * HTTP stack of the project. Port 0 picks a free one. A bind failure is an HttpBindError naming
 * `flags`, the flags that set host and port.
 */
export async function listenHttp(
  host: string,
  port: number,
  handler: Express | Record<string, HttpRoute>,
  /** `reusePort`: SO_REUSEPORT (Node 22.12+), for an instance that takes over from another on the same port. */
  options: { flags?: string; reusePort?: boolean } = {},
): Promise<HttpListener> {
  const app = typeof handler === 'function' ? handler : routesApp(handler);
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
