import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { Cancellation } from './cancellation.js';
import { QTYPE, RCODE } from './constants.js';
import { buildQueryMessage, decodeMessage, encodeMessage } from './message.js';
import { parseQuery } from './query.js';
import { buildBareResponse } from './response.js';
import { createUpstreamTcp, type UpstreamTcp } from './upstream-tcp.js';

const servers: net.Server[] = [];
const pools: UpstreamTcp[] = [];
afterEach(() => {
  for (const p of pools.splice(0)) p.close();
  for (const s of servers.splice(0)) s.close();
});

interface ServerBehaviour {
  /** Hold a reply this long, by the query's first label (`slow-…` waits). */
  delayMs?: (name: string) => number;
  /** Close the connection, unanswered, on the query with this ordinal (1-based, over all connections). */
  closeOnQuery?: number;
  /** Answer with another question (a reply that must not be taken). */
  wrongQuestion?: boolean;
  /** Answer a query for `xfr…` in this many messages, the later ones without the question; close after the first when `cutStream`. */
  streamParts?: number;
  cutStream?: boolean;
}

/** A DNS-over-TCP server answering REFUSED per query, out of order when told to wait. */
async function tcpServer(behaviour: ServerBehaviour = {}) {
  const seen = { connections: 0, queries: 0, ids: [] as number[], closedByClient: 0 };
  const server = net.createServer((socket) => {
    seen.connections++;
    let buffered = Buffer.alloc(0);
    socket.on('end', () => seen.closedByClient++);
    socket.on('error', () => undefined);
    socket.on('data', (chunk) => {
      buffered = Buffer.concat([buffered, chunk]);
      while (buffered.length >= 2 && buffered.length >= 2 + buffered.readUInt16BE(0)) {
        const msg = buffered.subarray(2, 2 + buffered.readUInt16BE(0));
        buffered = buffered.subarray(2 + msg.length);
        const n = ++seen.queries;
        seen.ids.push(msg.readUInt16BE(0));
        if (n === behaviour.closeOnQuery) {
          socket.destroy();
          return;
        }
        const q = parseQuery(Buffer.from(msg));
        const reply = buildBareResponse(
          behaviour.wrongQuestion ? parseQuery(query('other.example.org', q.id)) : q,
          RCODE.REFUSED,
        );
        const framed = Buffer.alloc(reply.length + 2);
        framed.writeUInt16BE(reply.length, 0);
        reply.copy(framed, 2);
        if (behaviour.streamParts && q.qname.startsWith('xfr')) {
          socket.write(framed);
          if (behaviour.cutStream) {
            // After the first message is flushed: the stream is cut mid-way.
            socket.end();
            return;
          }
          // The rest: a header alone (QDCOUNT 0), as later messages of a transfer may be.
          for (let part = 1; part < behaviour.streamParts; part++) {
            const rest = Buffer.alloc(2 + 12);
            rest.writeUInt16BE(12, 0);
            reply.copy(rest, 2, 0, 4);
            setTimeout(() => socket.write(rest), 5 * part);
          }
          continue;
        }
        setTimeout(() => socket.write(framed), behaviour.delayMs?.(q.qname) ?? 0);
      }
    });
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return { at: { host: '127.0.0.1', port: (server.address() as net.AddressInfo).port }, seen };
}

const query = (name: string, id = 1) => encodeMessage(buildQueryMessage(id, name, QTYPE.A));
const nameOf = (reply: Buffer) => decodeMessage(reply).questions[0]?.name;
const pool = (options?: Parameters<typeof createUpstreamTcp>[0]) => {
  const p = createUpstreamTcp(options);
  pools.push(p);
  return p;
};

describe('createUpstreamTcp', () => {
  it('pipelines queries on one kept connection and matches replies that come back out of order', async () => {
    const { at, seen } = await tcpServer({ delayMs: (name) => (name.startsWith('slow') ? 50 : 0) });
    const tcp = pool();
    // The same ID for all of them: the pool makes each unique on the connection.
    const names = Array.from({ length: 100 }, (_, i) => `${i % 2 ? 'slow' : 'fast'}${i}.example.org.`);
    const replies = await Promise.all(names.map((n) => tcp.exchange(at, query(n, 7), { timeoutMs: 2000 })));
    expect(replies.map(nameOf)).toEqual(names);
    expect(seen.connections).toBe(1);
    expect(new Set(seen.ids).size).toBe(100);
    // Kept for the next ones.
    await tcp.exchange(at, query('again.example.org'), { timeoutMs: 2000 });
    expect(seen.connections).toBe(1);
    expect(tcp.connections()).toBe(1);
    expect(tcp.opened).toBe(1);
  });

  it('opens another connection past the in-flight limit, up to the per-server cap', async () => {
    const { at, seen } = await tcpServer({ delayMs: () => 20 });
    const tcp = pool({ maxInFlightPerConnection: 10, maxConnectionsPerServer: 3 });
    const replies = await Promise.all(
      Array.from({ length: 50 }, (_, i) => tcp.exchange(at, query(`n${i}.example.org`, i), { timeoutMs: 2000 })),
    );
    expect(replies).toHaveLength(50);
    expect(seen.connections).toBe(3);
  });

  it('asks again on a new connection when the server closes with a query unanswered (RFC 7766)', async () => {
    const { at, seen } = await tcpServer({ closeOnQuery: 2 });
    const tcp = pool();
    expect(nameOf(await tcp.exchange(at, query('first.example.org'), { timeoutMs: 2000 }))).toBe('first.example.org.');
    expect(nameOf(await tcp.exchange(at, query('second.example.org'), { timeoutMs: 2000 }))).toBe(
      'second.example.org.',
    );
    expect(seen.connections).toBe(2);
    expect(seen.queries).toBe(3);
  });

  it('gives up a query at once when it is cancelled, freeing its slot on the kept connection', async () => {
    const { at, seen } = await tcpServer({ delayMs: () => 60_000 });
    const p = pool({ maxInFlightPerConnection: 1, maxConnectionsPerServer: 1 });
    const asker = new Cancellation();
    const held = p.exchange(at, query('held.example.org'), { timeoutMs: 60_000, cancel: asker });
    const reason = new Error('pushed out');
    asker.cancel(reason);
    await expect(held).rejects.toBe(reason);
    // The one slot is free again: the next query goes out on the same connection.
    const next = p.exchange(at, query('next.example.org'), { timeoutMs: 200 });
    await expect(next).rejects.toThrow(/200/);
    expect([seen.connections, seen.queries]).toEqual([1, 2]);
  });

  it('rejects when a connection that never answered is closed', async () => {
    const { at } = await tcpServer({ closeOnQuery: 1 });
    await expect(pool().exchange(at, query('x.example.org'), { timeoutMs: 2000 })).rejects.toThrow(/closed/);
  });

  it('drops a reply to another question, tells why, and times out', async () => {
    const { at } = await tcpServer({ wrongQuestion: true });
    const reasons: string[] = [];
    await expect(
      pool().exchange(at, query('asked.example.org'), { timeoutMs: 300, onRejected: (r) => reasons.push(r) }),
    ).rejects.toThrow(/300/);
    expect(reasons).toEqual(['question']);
  });

  it('closes a connection idle for idleTimeoutMs, and opens a new one for the next query', async () => {
    const { at, seen } = await tcpServer();
    const tcp = pool({ idleTimeoutMs: 100 });
    await tcp.exchange(at, query('a.example.org'), { timeoutMs: 2000 });
    const deadline = Date.now() + 5000;
    while (tcp.connections() > 0 && Date.now() < deadline) await new Promise((r) => setImmediate(r));
    expect(tcp.connections()).toBe(0);
    expect(seen.closedByClient).toBe(1);
    await tcp.exchange(at, query('b.example.org'), { timeoutMs: 2000 });
    expect(seen.connections).toBe(2);
  });

  it('fails fast on a refused connection, and refuses queries once closed', async () => {
    const { at } = await tcpServer();
    const free = servers.pop() as net.Server;
    await new Promise<void>((r) => free.close(() => r()));
    const tcp = pool();
    await expect(tcp.exchange(at, query('x.example.org'), { timeoutMs: 2000 })).rejects.toThrow(/ECONNREFUSED/);
    tcp.close();
    await expect(tcp.exchange(at, query('x.example.org'), { timeoutMs: 2000 })).rejects.toThrow(/closed/);
  });

  it('streams a transfer in several messages on the kept connection, beside queries, and does not ask it again once cut', async () => {
    const server = await tcpServer({ streamParts: 3, delayMs: () => 8 });
    const p = pool();
    const messages: number[] = [];
    const [streamed, plain] = await Promise.all([
      p.stream(server.at, query('xfr.example.org', 7), {
        onMessage: (m) => {
          messages.push(m.readUInt16BE(4));
          return messages.length === 3;
        },
      }),
      p.exchange(server.at, query('www.example.org', 7), {}),
    ]);
    expect(streamed).toBeUndefined();
    // The first message with its question, the others without; a plain query between them.
    expect(messages).toEqual([1, 0, 0]);
    expect(nameOf(plain)).toBe('www.example.org.');
    expect(p.opened).toBe(1);
    expect(server.seen.connections).toBe(1);

    const cut = await tcpServer({ streamParts: 3, cutStream: true });
    const got: Buffer[] = [];
    // A warm connection first, so a close would earn a plain query its one retry.
    await p.exchange(cut.at, query('warm.example.org'), {});
    await expect(p.stream(cut.at, query('xfr.example.org'), { onMessage: (m) => got.push(m) === 3 })).rejects.toThrow();
    expect(got.length).toBe(1);
    expect(cut.seen.queries).toBe(2);
  });
});
