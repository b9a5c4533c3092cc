import net from 'node:net';
import { query } from '@cluster-dns/testkit';
import { decodeMessage } from '@cluster-dns/wire';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Stack, startStack, tcpClient } from '../support/stack.js';

// What TCP clients can do to a DNS server (RFC 7766) besides sending bad messages: stall,
// trickle, idle, pipeline, half-close, and open connections by the thousand.
const GOOD = ['kubernetes', 'default', 'svc', 'cluster', 'local'];
const good = (id: number) => {
  const m = query(GOOD);
  m.writeUInt16BE(id, 0);
  return m;
};
const isGood = (reply: Buffer | undefined) =>
  reply !== undefined && decodeMessage(reply).answers.some((a) => a.address === '10.96.0.1');

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({
    fwArgs: ['--tcp-idle-timeout=1s', '--max-tcp-connections=300', '--max-tcp-connections-per-client=100'],
  });
}, 60_000);
afterAll(async () => {
  await stack?.close();
});

/** A connection from a chosen loopback address (127.0.0.x: another client). */
function connectFrom(localAddress: string, port: number): Promise<net.Socket | undefined> {
  return new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port, localAddress });
    s.once('connect', () => resolve(s));
    s.once('error', () => resolve(undefined));
  });
}

describe('forwarder TCP under abuse', () => {
  it('answers a query split octet by octet, and 50 pipelined ones in full', async () => {
    const tcp = await tcpClient(stack.fwPort);
    for (const octet of tcp.frame(good(1))) {
      tcp.write(Buffer.from([octet]));
      await new Promise((r) => setImmediate(r));
    }
    expect(await tcp.waitFor(1)).toBe(true);
    expect(isGood(tcp.replies[0])).toBe(true);
    tcp.write(Buffer.concat(Array.from({ length: 50 }, (_, i) => tcp.frame(good(100 + i)))));
    expect(await tcp.waitFor(51)).toBe(true);
    expect(new Set(tcp.replies.slice(1).map((r) => r.readUInt16BE(0))).size).toBe(50);
    tcp.destroy();
  });

  it('ignores a zero-length message and answers the next; answers a half-closed client, then closes', async () => {
    const tcp = await tcpClient(stack.fwPort);
    tcp.write(Buffer.from([0, 0]));
    tcp.send(good(2));
    tcp.end();
    expect(await tcp.waitFor(1)).toBe(true);
    expect(isGood(tcp.replies[0])).toBe(true);
    expect(await tcp.closedWithin(3000)).toBe(true);
  });

  it('closes an idle connection and a trickling one (slowloris) after --tcp-idle-timeout', async () => {
    const idle = await tcpClient(stack.fwPort);
    const slow = await tcpClient(stack.fwPort);
    slow.write(Buffer.from([0, 40, 0x12]));
    expect(await idle.closedWithin(5000)).toBe(true);
    expect(await slow.closedWithin(5000)).toBe(true);
    expect(slow.replies).toEqual([]);
  });

  it('caps one client at --max-tcp-connections-per-client while another still connects and is answered', async () => {
    // 150 connections from 127.0.0.2, each asking once: at most 100 are answered, the rest closed.
    const outcomes = await Promise.all(
      Array.from({ length: 150 }, async (_, i) => {
        const s = await connectFrom('127.0.0.2', stack.fwPort);
        if (!s) return { s, answered: false };
        const answered = await new Promise<boolean>((resolve) => {
          s.once('data', () => resolve(true));
          s.once('close', () => resolve(false));
          const m = good(1000 + i);
          const f = Buffer.alloc(m.length + 2);
          f.writeUInt16BE(m.length, 0);
          m.copy(f, 2);
          s.write(f);
        });
        return { s, answered };
      }),
    );
    const answered = outcomes.filter((o) => o.answered).length;
    expect(answered).toBeLessThanOrEqual(100);
    expect(answered).toBeGreaterThanOrEqual(90);
    const other = await tcpClient(stack.fwPort);
    other.send(good(3));
    expect(await other.waitFor(1)).toBe(true);
    expect(isGood(other.replies[0])).toBe(true);
    other.destroy();
    for (const o of outcomes) o.s?.destroy();
    expect(stack.fw.child.exitCode).toBeNull();
  });
});
