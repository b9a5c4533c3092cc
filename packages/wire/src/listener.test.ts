import dgram from 'node:dgram';
import { Resolver } from 'node:dns/promises';
import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { exchangeRaw, queryDns } from './client.js';
import { QTYPE, RCODE } from './constants.js';
import {
  DEFAULT_UDP_RECEIVE_BUFFER_BYTES,
  type DnsListener,
  listenDns,
  reusePortSupported,
  udpPortInUse,
} from './listener.js';
import { encodeMessage } from './message.js';
import { parseQuery } from './query.js';
import { buildBareResponse, buildHeaderOnlyResponse } from './response.js';

const open: DnsListener[] = [];
afterEach(async () => {
  for (const l of open.splice(0)) await l.close();
});

/** A tiny server: A 192.0.2.1 for anything, through the real listener; `later` answers a turn later. */
async function serveFixed(later = false) {
  const listener = await listenDns({
    host: '127.0.0.1',
    port: 0,
    handler: async (raw) => {
      let q: ReturnType<typeof parseQuery>;
      try {
        q = parseQuery(raw);
      } catch {
        return buildHeaderOnlyResponse(raw, RCODE.FORMERR);
      }
      if (later) await new Promise((r) => setImmediate(r));
      const reply = encodeMessage({
        id: q.id,
        flags: { qr: true, opcode: 0, aa: true, tc: false, rd: q.rd, ra: false, ad: false, cd: false, rcode: 0 },
        questions: [{ name: q.qname, type: q.qtype, class: q.qclass }],
        answers: q.qtype === QTYPE.A ? [{ name: q.qname, type: QTYPE.A, class: 1, ttl: 30, address: '192.0.2.1' }] : [],
        authorities: [],
        additionals: [],
      });
      return reply;
    },
  });
  open.push(listener);
  return listener;
}

describe('listenDns and the client', () => {
  it('serves UDP and TCP on one port, to node:dns and to our client', async () => {
    const server = await serveFixed();
    expect(server.port).toBeGreaterThan(0);
    const resolver = new Resolver({ timeout: 1000, tries: 1 });
    resolver.setServers([`127.0.0.1:${server.port}`]);
    expect(await resolver.resolve4('x.example.org')).toEqual(['192.0.2.1']);
    const tcp = await queryDns({ host: '127.0.0.1', port: server.port }, 'x.example.org', QTYPE.A, {
      transport: 'tcp',
    });
    expect(tcp.answers[0]?.address).toBe('192.0.2.1');
  });

  it('answers pipelined TCP queries on one connection', async () => {
    const server = await serveFixed(true);
    const net = await import('node:net');
    const socket = net.connect(server.port, '127.0.0.1');
    await new Promise((r) => socket.once('connect', r));
    const ids = [1, 2, 3];
    const frames = ids.map((id) => {
      const q = encodeMessage({
        id,
        flags: { qr: false, opcode: 0, aa: false, tc: false, rd: true, ra: false, ad: false, cd: false, rcode: 0 },
        questions: [{ name: `n${id}.example.org`, type: 1, class: 1 }],
        answers: [],
        authorities: [],
        additionals: [],
      });
      const f = Buffer.alloc(q.length + 2);
      f.writeUInt16BE(q.length);
      q.copy(f, 2);
      return f;
    });
    socket.write(Buffer.concat(frames));
    const seen: number[] = [];
    let buffered = Buffer.alloc(0);
    await new Promise<void>((resolve) => {
      socket.on('data', (chunk) => {
        buffered = Buffer.concat([buffered, chunk]);
        while (buffered.length >= 2 && buffered.length >= 2 + buffered.readUInt16BE(0)) {
          seen.push(buffered.readUInt16BE(2));
          buffered = buffered.subarray(2 + buffered.readUInt16BE(0));
        }
        if (seen.length === 3) resolve();
      });
    });
    socket.destroy();
    expect(seen.sort()).toEqual(ids);
  });

  it('answers a UDP query from the express lane when it can, and from the handler otherwise and over TCP', async () => {
    const seen: Array<{ name: string; family: number }> = [];
    const listener = await listenDns({
      host: '127.0.0.1',
      port: 0,
      // The lane takes A queries only, answering NXDOMAIN; the handler answers REFUSED.
      express: (raw, family) => {
        const q = parseQuery(raw);
        seen.push({ name: q.key, family });
        return q.qtype === QTYPE.A ? buildBareResponse(q, RCODE.NXDOMAIN) : undefined;
      },
      handler: (raw) => buildBareResponse(parseQuery(raw), RCODE.REFUSED),
    });
    open.push(listener);
    const server = { host: '127.0.0.1', port: listener.port };
    expect((await queryDns(server, 'a.example.org', QTYPE.A)).flags.rcode).toBe(RCODE.NXDOMAIN);
    expect((await queryDns(server, 'b.example.org', QTYPE.AAAA)).flags.rcode).toBe(RCODE.REFUSED);
    expect((await queryDns(server, 'c.example.org', QTYPE.A, { transport: 'tcp' })).flags.rcode).toBe(RCODE.REFUSED);
    expect(seen).toEqual([
      { name: 'a.example.org.', family: 4 },
      { name: 'b.example.org.', family: 4 },
    ]);
  });

  it('leaves a query to the handler when the express lane throws, and reports it', async () => {
    const errors: unknown[] = [];
    const listener = await listenDns({
      host: '127.0.0.1',
      port: 0,
      express: () => {
        throw new Error('lane broke');
      },
      handler: (raw) => buildBareResponse(parseQuery(raw), RCODE.NXDOMAIN),
      onHandlerError: (error) => errors.push(error),
    });
    open.push(listener);
    const server = { host: '127.0.0.1', port: listener.port };
    expect((await queryDns(server, 'a.example.org', QTYPE.A)).flags.rcode).toBe(RCODE.NXDOMAIN);
    expect((await queryDns(server, 'b.example.org', QTYPE.A)).flags.rcode).toBe(RCODE.NXDOMAIN);
    expect(errors.map((e) => (e as Error).message)).toEqual(['lane broke', 'lane broke']);
  });

  it('drops a reply with the wrong ID and waits for the right one', async () => {
    const fake = dgram.createSocket('udp4');
    await new Promise<void>((r) => fake.bind(0, '127.0.0.1', () => r()));
    const port = fake.address().port;
    fake.on('message', (msg, rinfo) => {
      const q = parseQuery(msg);
      const wrong = buildBareResponse(q, RCODE.NXDOMAIN);
      wrong.writeUInt16BE((q.id + 1) & 0xffff, 0);
      fake.send(wrong, rinfo.port, rinfo.address);
      setTimeout(() => fake.send(buildBareResponse(q, RCODE.REFUSED), rinfo.port, rinfo.address), 20);
    });
    const rejected: string[] = [];
    const reply = await queryDns({ host: '127.0.0.1', port }, 'a.example.org', QTYPE.A, {
      onRejected: (r) => rejected.push(r),
    });
    fake.close();
    expect(rejected).toEqual(['id']);
    expect(reply.flags.rcode).toBe(RCODE.REFUSED);
  });

  it('times out with the server named when nothing answers', async () => {
    const silent = dgram.createSocket('udp4');
    await new Promise<void>((r) => silent.bind(0, '127.0.0.1', () => r()));
    const port = silent.address().port;
    const query = encodeMessage({
      id: 7,
      flags: { qr: false, opcode: 0, aa: false, tc: false, rd: true, ra: false, ad: false, cd: false, rcode: 0 },
      questions: [{ name: 'a.example.org', type: 1, class: 1 }],
      answers: [],
      authorities: [],
      additionals: [],
    });
    await expect(exchangeRaw({ host: '127.0.0.1', port }, query, { timeoutMs: 100 })).rejects.toThrow(
      `127.0.0.1:${port}`,
    );
    silent.close();
  });

  it('fails at once, not at the timeout, when nothing listens on the port (connected UDP)', async () => {
    const closed = dgram.createSocket('udp4');
    await new Promise<void>((r) => closed.bind(0, '127.0.0.1', () => r()));
    const port = closed.address().port;
    closed.close();
    // ECONNREFUSED, not the 60 s timeout: the refusal itself ended the wait.
    await expect(
      queryDns({ host: '127.0.0.1', port }, 'a.example.org', QTYPE.A, { timeoutMs: 60_000 }),
    ).rejects.toThrow(/ECONNREFUSED/);
  });

  it('names the address when the port is taken', async () => {
    const server = await serveFixed();
    await expect(listenDns({ host: '127.0.0.1', port: server.port, handler: () => undefined })).rejects.toThrow(
      `cannot listen on 127.0.0.1:${server.port}/tcp: EADDRINUSE`,
    );
  });

  it('asks the kernel for a UDP receive buffer that holds a busy moment, within net.core.rmem_max', async () => {
    const rmemMax = Number(readFileSync('/proc/sys/net/core/rmem_max', 'utf8'));
    const listener = await listenDns({ host: '127.0.0.1', port: 0, handler: () => undefined });
    open.push(listener);
    // Linux grants twice what is asked (bookkeeping included), capped at rmem_max.
    expect(listener.udpReceiveBufferBytes()).toBe(2 * Math.min(DEFAULT_UDP_RECEIVE_BUFFER_BYTES, rmemMax));
    const small = await listenDns({
      host: '127.0.0.1',
      port: 0,
      handler: () => undefined,
      udpReceiveBufferBytes: 65536,
    });
    open.push(small);
    expect(small.udpReceiveBufferBytes()).toBe(2 * Math.min(65536, rmemMax));
  });
});

describe('SO_REUSEPORT', () => {
  it('knows which Node versions have reusePort', () => {
    expect(reusePortSupported('20.19.0')).toBe(false);
    expect(reusePortSupported('22.11.0')).toBe(false);
    expect(reusePortSupported('22.12.0')).toBe(true);
    expect(reusePortSupported('23.0.0')).toBe(false);
    expect(reusePortSupported('23.1.0')).toBe(true);
    expect(reusePortSupported('24.0.0')).toBe(true);
  });

  it.skipIf(reusePortSupported())('refuses reusePort on a Node without it, naming the version', async () => {
    await expect(
      listenDns({ host: '127.0.0.1', port: 0, handler: () => undefined, reusePort: true, flags: '--port' }),
    ).rejects.toThrow(/SO_REUSEPORT needs Node 22\.12 or later; this is v/);
  });

  it('tells whether a UDP port is served, so a handing-over instance leaves its setup to the next', async () => {
    const socket = dgram.createSocket('udp4');
    await new Promise<void>((r) => socket.bind(0, '127.0.0.1', () => r()));
    const { port } = socket.address();
    expect(await udpPortInUse('127.0.0.1', port)).toBe(true);
    await new Promise<void>((r) => socket.close(() => r()));
    expect(await udpPortInUse('127.0.0.1', port)).toBe(false);
  });
});
