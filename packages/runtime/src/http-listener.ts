import http from 'node:http';
import type { AddressInfo } from 'node:net';

export type HttpRoute = (
  request: http.IncomingMessage,
  url: URL,
) =>
  | { status: number; body: string; contentType?: string }
  | Promise<{ status: number; body: string; contentType?: string }>;

export interface HttpListener {
  readonly host: string;
  readonly port: number;
  close(): Promise<void>;
}

/**
 * A small GET-only HTTP server for probes, metrics and debug dumps. Port 0 picks a free one.
 * A bind failure names the address and the reason.
 */
export async function listenHttp(host: string, port: number, routes: Record<string, HttpRoute>): Promise<HttpListener> {
  const server = http.createServer(async (req, res) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const route = routes[url.pathname];
    try {
      const out = route ? await route(req, url) : { status: 404, body: '404 page not found\n' };
      res.writeHead(out.status, { 'content-type': out.contentType ?? 'text/plain; charset=utf-8' });
      res.end(out.body);
    } catch (error) {
      res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' });
      res.end(`error: ${(error as Error).message}\n`);
    }
  });
  server.keepAliveTimeout = 5000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) =>
      reject(new Error(`cannot listen on ${host}:${port}/http: ${error.code ?? error.message}`, { cause: error })),
    );
    server.listen(port, host, () => resolve());
  });
  return {
    host,
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
