import dgram from 'node:dgram';
import net from 'node:net';
import { startTestUpstream, waitFor } from '@cluster-dns/testkit';
import { buildQueryMessage, decodeMessage, encodeMessage, QTYPE, RCODE } from '@cluster-dns/wire';
import { afterEach, describe, expect, it } from 'vitest';
import { launchForwarder } from './harness.js';

const stops: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const s of stops.splice(0).reverse()) await s();
});

const query = (id: number, name: string) => encodeMessage(buildQueryMessage(id, name, QTYPE.A));

describe('forwarder shutdown', () => {
  it('answers every query in flight at SIGTERM, UDP and pipelined TCP, and exits 0', async () => {
    // An upstream that holds every question until the forwarder is draining: the queries are all
    // still waiting on it at SIGTERM.
    const up = await startTestUpstream({
      records: { 'slow.example.org.': [{ type: QTYPE.A, address: '192.0.2.9' }] },
      hold: true,
    });
    stops.push(() => up.close());
    // Timeouts far longer than the test holds the questions: they wait on the upstream, never time out.
    const proc = await launchForwarder(up.address, ['--upstream-timeout=30s', '--forward-deadline=30s']);
    stops.push(() => proc.stop('SIGKILL'));
    const port = proc.ready.port as number;

    const udp = dgram.createSocket('udp4');
    const udpReplies = new Map<number, number>();
    udp.on('message', (m) => udpReplies.set(m.readUInt16BE(0), decodeMessage(m).flags.rcode));
    await new Promise<void>((r) => udp.bind(0, '127.0.0.1', () => r()));
    for (let id = 1; id <= 20; id++) udp.send(query(id, `u${id}.slow.example.org`), port, '127.0.0.1');

    const tcp = net.connect(port, '127.0.0.1');
    const tcpReplies: number[] = [];
    let buffered = Buffer.alloc(0);
    tcp.on('data', (chunk) => {
      buffered = Buffer.concat([buffered, chunk]);
      while (buffered.length >= 2 && buffered.length >= 2 + buffered.readUInt16BE(0)) {
        tcpReplies.push(buffered.readUInt16BE(2));
        buffered = buffered.subarray(2 + buffered.readUInt16BE(0));
      }
    });
    const tcpEnded = new Promise<void>((r) => tcp.on('end', () => r()));
    await new Promise<void>((r) => tcp.on('connect', () => r()));
    tcp.write(
      Buffer.concat(
        [21, 22, 23, 24, 25].map((id) => {
          const q = query(id, `t${id}.slow.example.org`);
          return Buffer.concat([Buffer.from([0, q.length]), q]);
        }),
      ),
    );
    await waitFor(() => up.held() === 25, { what: 'all 25 queries held upstream', seen: () => up.held() });

    const exit = proc.stop('SIGTERM', 15_000);
    await proc.waitForLog((l) => l.msg === 'lameduck: still answering', 10_000, 'the SIGTERM taken');
    expect(udpReplies.size + tcpReplies.length).toBe(0);
    up.release();
    expect(await exit).toBe(0);
    await waitFor(() => udpReplies.size === 20, { what: 'the 20 UDP answers', seen: () => udpReplies.size });
    await tcpEnded;
    udp.close();
    expect([...udpReplies.keys()].sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    expect([...udpReplies.values()].every((rcode) => rcode === RCODE.NXDOMAIN)).toBe(true);
    // Pipelined answers go out as each is ready, in any order (RFC 7766 §6.2.1.1).
    expect(tcpReplies.sort((a, b) => a - b)).toEqual([21, 22, 23, 24, 25]);
    expect(proc.logs.filter((l) => l.level === 'fatal' || l.level === 'error')).toEqual([]);
  });
});
