import { Buffer } from 'node:buffer';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { type DnsListener, type ListenDnsOptions, listenDns } from './listener.js';

// A client that pipelines queries and never reads its replies must cost this process a bounded
// amount of memory, and must not slow the clients that do read.

const open: DnsListener[] = [];
const sockets: net.Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  for (const l of open.splice(0)) await l.close({ deadlineMs: 100 });
});

/** A listener whose handler answers every query with `replyBytes` octets at once, counting calls. */
async function bigAnswers(replyBytes: number, extra: Partial<ListenDnsOptions> = {}) {
  const calls = { n: 0 };
  const reply = Buffer.alloc(replyBytes, 0x61);
  const l = await listenDns({
    host: '127.0.0.1',
    port: 0,
    handler: () => {
      calls.n++;
      return reply;
    },
    ...extra,
  });
  open.push(l);
  return { l, calls };
}

const frame = (id: number) => {
  const out = Buffer.alloc(2 + 12);
  out.writeUInt16BE(12, 0);
  out.writeUInt16BE(id, 2);
  return out;
};

/** Connects, writes `count` queries in one go, and never reads a reply. */
const stalledClient = (port: number, count: number) =>
  new Promise<net.Socket>((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1', () => {
      s.pause();
      s.write(Buffer.concat(Array.from({ length: count }, (_, i) => frame(i))));
      resolve(s);
    });
    s.on('error', reject);
    sockets.push(s);
  });

/** Connects, asks one query and resolves with the reply's length once it is read whole. */
const askOnce = (port: number) =>
  new Promise<number>((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1', () => s.write(frame(1)));
    sockets.push(s);
    let got = Buffer.alloc(0);
    s.on('data', (chunk) => {
      got = Buffer.concat([got, chunk]);
      if (got.length >= 2 && got.length >= 2 + got.readUInt16BE(0)) {
        s.destroy();
        resolve(got.readUInt16BE(0));
      }
    });
    s.on('error', reject);
  });

/** Waits, turning the event loop, until `check` holds. */
async function until(check: () => boolean, what: string, seen: () => unknown) {
  const deadline = Date.now() + 20_000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`never saw ${what}; saw ${JSON.stringify(seen())}`);
    await new Promise((r) => setImmediate(r));
  }
}

describe('listenDns TCP backpressure', () => {
  it('stops taking queries from a client that does not read, serves the others, and closes it at the write timeout', async () => {
    const { l, calls } = await bigAnswers(60_000, { tcpWriteTimeoutMs: 1_000 });
    const stalled = await stalledClient(l.port, 2_000);
    // The sweep has measured the unsent replies once they pass the connection's cap (64 KiB).
    await until(
      () => l.tcpUnsentBytes() >= 64 * 1024,
      'unsent replies measured',
      () => [l.tcpUnsentBytes(), calls.n],
    );
    const taken = calls.n;
    // The kernel's buffers take a few MiB of replies on loopback; past them, nothing more is read.
    // Without backpressure every query is taken and 120 MB of replies wait in this process.
    expect(taken, `queries taken from the stalled client: ${taken}`).toBeLessThan(1_000);
    expect(l.tcpUnsentBytes()).toBeLessThan(2 * 60_000 + 64 * 1024);
    expect(await askOnce(l.port)).toBe(60_000);
    await until(
      () => l.tcpStalls().timeout === 1,
      'the stalled connection closed',
      () => l.tcpStalls(),
    );
    expect(l.tcpStalls()).toEqual({ timeout: 1, budget: 0 });
    expect(stalled.destroyed).toBe(false);
    expect(calls.n - 1).toBe(taken);
  });

  it('keeps every connection’s unsent replies within the total budget, closing the ones that read nothing', async () => {
    const { l } = await bigAnswers(60_000, {
      tcpWriteTimeoutMs: 600_000,
      maxTcpUnsentTotalBytes: 512 * 1024,
    });
    const stalled = await Promise.all(Array.from({ length: 12 }, () => stalledClient(l.port, 400)));
    // Each one holds up to ~120 KiB unsent: twelve hold ~1.4 MiB, over the 512 KiB budget.
    await until(
      () => l.tcpStalls().budget > 0,
      'a connection closed for the budget',
      () => l.tcpStalls(),
    );
    await until(
      () => l.tcpUnsentBytes() <= 512 * 1024,
      'the total back under the budget',
      () => l.tcpUnsentBytes(),
    );
    expect(l.tcpStalls().timeout).toBe(0);
    await until(
      () => l.tcpConnections() < stalled.length,
      'fewer connections',
      () => l.tcpConnections(),
    );
    expect(await askOnce(l.port)).toBe(60_000);
  });

  it('takes a pipelined flood a batch a turn, so another connection’s query is answered before the flood is', async () => {
    const order: number[] = [];
    const l = await listenDns({
      host: '127.0.0.1',
      port: 0,
      handler: (message) => {
        order.push(message.readUInt16BE(0));
        return Buffer.from(message);
      },
    });
    open.push(l);
    const flood = net.connect(l.port, '127.0.0.1');
    const other = net.connect(l.port, '127.0.0.1');
    sockets.push(flood, other);
    await Promise.all([flood, other].map((s) => new Promise((r) => s.once('connect', r))));
    let answered = false;
    other.on('data', () => {
      answered = true;
    });
    flood.on('data', () => {});
    flood.write(Buffer.concat(Array.from({ length: 3000 }, (_, i) => frame(i))));
    other.write(frame(60_000));
    await until(
      () => answered && order.length >= 3001,
      'every query taken',
      () => order.length,
    );
    // Without batches the flood's 3,000 would all be taken, in one go, before the other's one.
    expect(order.indexOf(60_000), `taken at ${order.indexOf(60_000)}`).toBeLessThan(1000);
  });

  it('takes at most maxTcpPipelined queries at a time from one write, and answers all of them', async () => {
    const held: Array<() => void> = [];
    const l = await listenDns({
      host: '127.0.0.1',
      port: 0,
      maxTcpPipelined: 5,
      handler: (message) => new Promise((resolve) => held.push(() => resolve(Buffer.from(message)))),
    });
    open.push(l);
    const s = net.connect(l.port, '127.0.0.1');
    sockets.push(s);
    let got = Buffer.alloc(0);
    s.on('data', (chunk) => {
      got = Buffer.concat([got, chunk]);
    });
    s.write(Buffer.concat(Array.from({ length: 50 }, (_, i) => frame(i))));
    let answered = 0;
    while (answered < 50) {
      await until(
        () => held.length > 0,
        'a held query',
        () => answered,
      );
      // Never more than five at once, though all fifty came in one write.
      expect(held.length).toBeLessThanOrEqual(5);
      for (const release of held.splice(0)) {
        release();
        answered++;
      }
    }
    await until(
      () => got.length === 50 * 14,
      'fifty replies',
      () => got.length,
    );
  });
});
