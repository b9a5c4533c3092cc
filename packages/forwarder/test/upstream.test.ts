import dgram from 'node:dgram';
import { waitFor } from '@cluster-dns/testkit';
import { QTYPE, RCODE } from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import { startForwarder, upstream } from './harness.js';

const records = { 'a.example.org.': [{ type: QTYPE.A, address: '192.0.2.1', ttl: 60 }] };

describe('upstreams', () => {
  it('fails over to the next server of the route and counts the failure', async () => {
    const dead = await upstream({ behaviour: 'drop' });
    const live = await upstream({ records });
    const f = await startForwarder([
      `--server=${dead.address}`,
      `--server=${live.address}`,
      '--upstream-timeout=200ms',
    ]);
    expect(await f.resolver.resolve4('a.example.org')).toEqual(['192.0.2.1']);
    expect(await f.stat('servers')).toEqual([`${dead.address} 1 1`, `${live.address} 1 0`]);
  });

  it('tries the next server after SERVFAIL', async () => {
    const sick = await upstream({ behaviour: 'servfail' });
    const live = await upstream({ records });
    const f = await startForwarder([`--server=${sick.address}`, `--server=${live.address}`]);
    expect((await f.query('a.example.org', QTYPE.A)).answers).toHaveLength(1);
  });

  it('answers SERVFAIL when every server fails, asking the next while the deadline allows', async () => {
    const a = await upstream({ behaviour: 'drop' });
    const b = await upstream({ behaviour: 'drop' });
    const f = await startForwarder([
      `--server=${a.address}`,
      `--server=${b.address}`,
      '--upstream-timeout=300ms',
      '--forward-deadline=1s',
    ]);
    const reply = await f.query('a.example.org', QTYPE.A, { timeoutMs: 10_000 });
    expect(reply.flags.rcode).toBe(RCODE.SERVFAIL);
    expect(a.queries).toHaveLength(1);
    expect(b.queries).toHaveLength(1);
  });

  it('stops trying servers at the deadline: a route of slow servers gets SERVFAIL after the first', async () => {
    const a = await upstream({ behaviour: 'drop' });
    const b = await upstream({ behaviour: 'drop' });
    // Each try may take 2 s, and so may the whole question: the second server is never asked.
    const f = await startForwarder([
      `--server=${a.address}`,
      `--server=${b.address}`,
      '--upstream-timeout=2s',
      '--forward-deadline=2s',
    ]);
    const reply = await f.query('a.example.org', QTYPE.A, { timeoutMs: 10_000 });
    expect(reply.flags.rcode).toBe(RCODE.SERVFAIL);
    expect(a.queries).toHaveLength(1);
    expect(b.queries).toHaveLength(0);
  });

  it("answers SERVFAIL with the default timeouts before a glibc client's 5 s timeout when all upstreams are silent", async () => {
    const a = await upstream({ behaviour: 'drop' });
    const f = await startForwarder([`--server=${a.address}`, `--server=${a.address}`, `--server=${a.address}`]);
    // The client gives up at 5 s, as glibc does: a forwarder that answered later would fail here.
    expect((await f.query('a.example.org', QTYPE.A, { timeoutMs: 5000 })).flags.rcode).toBe(RCODE.SERVFAIL);
  }, 10_000);

  // A server off the host gets a socket per query (the test upstream plays one with
  // --kept-loopback-sockets=false); one on loopback, kept sockets, connected: the kernel drops a
  // reply from another source before we see it.
  it.each([
    ...(['id', 'question', 'source', 'not-a-response', 'no-question'] as const).map((s) => [s, 'false', 1] as const),
    ...(['id', 'question', 'not-a-response', 'no-question'] as const).map((s) => [s, 'true', 1] as const),
    ['source', 'true', 0] as const,
  ])(
    'ignores a reply with the wrong %s and takes the real one (kept loopback sockets: %s)',
    async (spoof, kept, counted) => {
      const up = await upstream({ records, spoof });
      const f = await startForwarder([`--server=${up.address}`, `--kept-loopback-sockets=${kept}`]);
      const reply = await f.query('a.example.org', QTYPE.A);
      expect(reply.flags.rcode).toBe(RCODE.NOERROR);
      expect(reply.answers.map((a) => a.address)).toEqual(['192.0.2.1']);
      expect(f.forwarder.rejectedReplies()).toBe(counted);
    },
  );

  it('uses a random ID for each upstream query', async () => {
    const up = await upstream({
      records: { ...records, 'b.example.org.': records['a.example.org.'], 'c.example.org.': records['a.example.org.'] },
    });
    const f = await startForwarder([`--server=${up.address}`]);
    for (const n of ['a', 'b', 'c']) await f.query(`${n}.example.org`, QTYPE.A, { rd: true });
    const ids = new Set(up.queries.map((q) => q.id));
    expect(ids.size).toBe(3);
  });

  it('asks again over TCP when the upstream truncates, and truncates for a small client itself', async () => {
    const many = Array.from({ length: 60 }, (_, i) => ({ type: QTYPE.A, address: `192.0.2.${i + 1}`, ttl: 60 }));
    const up = await upstream({ records: { 'big.example.org.': many }, truncateUdp: true });
    const f = await startForwarder([`--server=${up.address}`, '--cache-size=100']);
    const udp = await f.query('big.example.org', QTYPE.A);
    expect(udp.flags.tc).toBe(true);
    expect(up.queries.map((q) => q.transport)).toEqual(['udp', 'tcp']);
    const tcp = await f.query('big.example.org', QTYPE.A, { transport: 'tcp' });
    expect(tcp.answers).toHaveLength(60);
    expect((await f.resolver.resolve4('big.example.org')).length).toBe(60);
  });

  it('refuses at once beyond --dns-forward-max queries in flight', async () => {
    const slow = await upstream({
      records: {
        'x.example.org.': records['a.example.org.'],
        'y.example.org.': records['a.example.org.'],
        'z.example.org.': records['a.example.org.'],
      },
      hold: true,
    });
    const f = await startForwarder([`--server=${slow.address}`, '--dns-forward-max=2']);
    const pending = [
      f.query('x.example.org', QTYPE.A, { timeoutMs: 20_000 }),
      f.query('y.example.org', QTYPE.A, { timeoutMs: 20_000 }),
    ];
    await waitFor(() => slow.held() === 2, { what: 'both questions held upstream', seen: () => slow.held() });
    // Refused while the upstream still holds both: at once, not after waiting for it.
    const third = await f.query('z.example.org', QTYPE.A);
    expect(third.flags.rcode).toBe(RCODE.REFUSED);
    expect(slow.held()).toBe(2);
    slow.release();
    expect((await Promise.all(pending)).every((r) => r.answers.length === 1)).toBe(true);
  });

  it('disables an upstream that loops back to itself (--dns-loop-detect)', async () => {
    // A relay that sends every query it gets back to the forwarder: a forwarding loop.
    const relay = dgram.createSocket('udp4');
    await new Promise<void>((r) => relay.bind(0, '127.0.0.1', () => r()));
    let forwarderPort = 0;
    relay.on('message', (msg) => {
      if (forwarderPort && (msg.readUInt16BE(2) & 0x8000) === 0) relay.send(msg, forwarderPort, '127.0.0.1');
    });
    const live = await upstream({ records });
    const relayAddress = `127.0.0.1#${relay.address().port}`;
    const f = await startForwarder([
      `--server=${live.address}`,
      '--dns-loop-detect',
      `--server=/loop.example.net/${relayAddress}`,
    ]);
    forwarderPort = f.port;
    await f.forwarder.detectLoops();
    relay.close();
    expect(f.forwarder.disabledServers()).toEqual([relayAddress]);
    expect(
      f.logs.some((l) => l.msg === 'forwarding loop detected: upstream sends our queries back to us; disabled'),
    ).toBe(true);
    expect((await f.query('x.loop.example.net', QTYPE.A)).flags.rcode).toBe(RCODE.SERVFAIL);
    expect((await f.query('a.example.org', QTYPE.A)).answers).toHaveLength(1);
  });
});
