import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type HttpListener, listenHttp } from './http-listener.js';

describe('listenHttp with a table of GET routes (node:http, no express)', () => {
  let server: HttpListener;
  let base: string;
  beforeAll(async () => {
    server = await listenHttp('127.0.0.1', 0, {
      '/metrics': () => ({ status: 200, body: 'up 1\n', contentType: 'text/plain; version=0.0.4; charset=utf-8' }),
      '/cache': async (_request, url) => ({ status: 200, body: `name=${url.searchParams.get('name')}\n` }),
      '/broken': () => {
        throw new Error('no store yet');
      },
    });
    base = `http://127.0.0.1:${server.port}`;
  });
  afterAll(() => server.close());

  it('answers a route with its status, body and content type', async () => {
    const response = await fetch(`${base}/metrics`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
    expect(await response.text()).toBe('up 1\n');
  });

  it('matches paths as express did: any case, a trailing slash, the query in the URL', async () => {
    expect(await (await fetch(`${base}/METRICS/`)).text()).toBe('up 1\n');
    const response = await fetch(`${base}/cache?name=kubernetes.default`);
    expect(response.headers.get('content-type')).toBe('text/plain; charset=utf-8');
    expect(await response.text()).toBe('name=kubernetes.default\n');
  });

  it('answers HEAD with the headers and no body', async () => {
    const response = await fetch(`${base}/metrics`, { method: 'HEAD' });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-length')).toBe('5');
    expect(await response.text()).toBe('');
  });

  it('gives 404 to other paths and methods, and 500 naming the error when a route throws', async () => {
    const missing = await fetch(`${base}/nothing`);
    expect([missing.status, await missing.text()]).toEqual([404, '404 page not found\n']);
    const posted = await fetch(`${base}/metrics`, { method: 'POST', body: 'x' });
    expect(posted.status).toBe(404);
    const broken = await fetch(`${base}/broken`);
    expect([broken.status, await broken.text()]).toEqual([500, 'error: no store yet\n']);
    // Still serving after the failure.
    expect((await fetch(`${base}/metrics`)).status).toBe(200);
  });
});
