import { Buffer } from 'node:buffer';
import { QTYPE, queryDns, RCODE } from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../logger.js';
import { ServerCore } from './server-core.js';

const log = createLogger({ component: 'test', level: 'error', write: () => undefined });
const refuseAll = (raw: Buffer) => {
  const reply = Buffer.from(raw);
  reply.writeUInt16BE((reply.readUInt16BE(2) | 0x8000 | RCODE.REFUSED) & 0xfff5, 2);
  return reply;
};

describe('the server core every process assembles its chains on', () => {
  it('answers on its listeners through the lameduck with readiness failing, then closes in reverse order', async () => {
    const server = new ServerCore({ log, lameduckMs: 300, lameduck: 'untilReady' });
    const closed: string[] = [];
    const dns = await server.listenDns('dns', { host: '127.0.0.1', port: 0, handler: refuseAll }, 500);
    const http = await server.listenHttp('health', '127.0.0.1', 0, {
      '/ready': () => (server.isReady() ? { status: 200, body: 'ok' } : { status: 503, body: 'no' }),
    });
    server.closers.push('timer', () => void closed.push('timer'));
    const ready = async () => (await fetch(`http://127.0.0.1:${http.port}/ready`)).status;
    expect(await ready()).toBe(503);
    server.markReady();
    expect(await ready()).toBe(200);
    const stopping = server.shutdown();
    // In the lameduck: not ready, still answering.
    expect(server.isReady()).toBe(false);
    expect(await ready()).toBe(503);
    const reply = await queryDns({ host: '127.0.0.1', port: dns.port }, 'x.example.org', QTYPE.A, { timeoutMs: 1000 });
    expect(reply.flags.rcode).toBe(RCODE.REFUSED);
    await stopping;
    // The last pushed closed first; every listener is closed.
    expect(closed).toEqual(['timer']);
    await expect(fetch(`http://127.0.0.1:${http.port}/ready`)).rejects.toThrow();
    await expect(
      queryDns({ host: '127.0.0.1', port: dns.port }, 'x.example.org', QTYPE.A, { timeoutMs: 300, transport: 'tcp' }),
    ).rejects.toThrow();
  });

  it('skips the lameduck of a server never ready, and waits it for one that has no readiness', async () => {
    const never = new ServerCore({ log, lameduckMs: 60_000, lameduck: 'untilReady' });
    await never.shutdown();
    const always = new ServerCore({ log, lameduckMs: 50, lameduck: 'always' });
    const started = performance.now();
    await always.shutdown();
    expect(performance.now() - started).toBeGreaterThanOrEqual(45);
  });
});
