import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { type DnsListener, listenDns } from './listener.js';

const open: DnsListener[] = [];
afterEach(async () => {
  for (const l of open.splice(0)) await l.close();
});

const connect = (port: number) =>
  new Promise<net.Socket>((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1', () => resolve(s));
    s.on('error', reject);
  });
const closed = (s: net.Socket) =>
  new Promise<void>((resolve) => (s.destroyed ? resolve() : s.once('close', () => resolve())));
/** Resolves once the listener counts `n` open connections: its own view, not a time waited. */
const counted = async (l: DnsListener, n: number) => {
  const error = new Error(`the listener never counted ${n} open connections`);
  const deadline = Date.now() + 10_000;
  while (l.tcpConnections() !== n) {
    if (Date.now() > deadline)
      throw Object.assign(error, { message: `${error.message}; it counts ${l.tcpConnections()}` });
    await new Promise((r) => setImmediate(r));
  }
};

describe('listenDns TCP limits (RFC 7766)', () => {
  it('closes a connection that stays idle past the idle timeout, and not before', async () => {
    const l = await listenDns({ host: '127.0.0.1', port: 0, handler: () => undefined, tcpIdleTimeoutMs: 150 });
    open.push(l);
    const started = Date.now();
    const s = await connect(l.port);
    await closed(s);
    // A lower bound only: a busy machine may close it late, never early. (Without the idle
    // timeout the socket would never close and the test would time out.)
    expect(Date.now() - started).toBeGreaterThanOrEqual(100);
  });

  it('closes new connections beyond the cap and serves again once one closes', async () => {
    const l = await listenDns({
      host: '127.0.0.1',
      port: 0,
      handler: () => undefined,
      maxTcpConnections: 2,
      tcpIdleTimeoutMs: 10_000,
    });
    open.push(l);
    const a = await connect(l.port);
    const b = await connect(l.port);
    await counted(l, 2);
    expect(l.tcpRefused()).toEqual({ limit: 0, perClient: 0 });
    const c = await connect(l.port);
    await closed(c);
    expect(l.tcpConnections()).toBe(2);
    // Counted, for the metrics: an operator sees clients turned away, not only fewer connections.
    expect(l.tcpRefused()).toEqual({ limit: 1, perClient: 0 });
    a.destroy();
    await counted(l, 1);
    const d = await connect(l.port);
    await counted(l, 2);
    expect(d.destroyed).toBe(false);
    b.destroy();
    d.destroy();
  });

  it("closes a client's connections beyond its own cap, while another client still connects", async () => {
    const l = await listenDns({
      host: '127.0.0.1',
      port: 0,
      handler: () => undefined,
      maxTcpConnections: 10,
      maxTcpConnectionsPerClient: 1,
    });
    open.push(l);
    const from = (localAddress: string) =>
      new Promise<net.Socket>((resolve, reject) => {
        const s = net.connect({ port: l.port, host: '127.0.0.1', localAddress }, () => resolve(s));
        s.on('error', reject);
      });
    const a = await from('127.0.0.1');
    await counted(l, 1);
    const b = await from('127.0.0.1');
    await closed(b);
    const c = await from('127.0.0.2');
    await counted(l, 2);
    expect(c.destroyed).toBe(false);
    expect(l.tcpRefused()).toEqual({ limit: 0, perClient: 1 });
    a.destroy();
    c.destroy();
  });

  it('survives a client that sends half a frame and resets', async () => {
    let calls = 0;
    const l = await listenDns({
      host: '127.0.0.1',
      port: 0,
      handler: () => {
        calls++;
        return undefined;
      },
    });
    open.push(l);
    const s = await connect(l.port);
    await counted(l, 1);
    s.write(Buffer.from([0x00, 0x40, 0x12, 0x34]));
    s.resetAndDestroy();
    // The listener has seen the reset once it no longer counts the connection.
    await counted(l, 0);
    expect(calls).toBe(0);
    const again = await connect(l.port);
    await counted(l, 1);
    again.destroy();
  });
});
