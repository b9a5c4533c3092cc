import dgram from 'node:dgram';
import { query, replyTo, waitFor } from '@cluster-dns/testkit';
import {
  buildBareResponse,
  buildNotify,
  buildQueryMessage,
  decodeMessage,
  encodeMessage,
  HEADER_BYTES,
  type ParsedQuery,
  parseQuery,
  QTYPE,
  RCODE,
  type Rr,
  toFqdn,
} from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import { startForwarder, upstream } from './harness.js';

// The forwarder against upstreams that fail, lie and flood: each case is one fault of the
// hardening issue's list, with what a resolver that trusts nothing must do about it.

const A = (address: string, ttl = 60) => ({ type: QTYPE.A, address, ttl });
const records = { 'a.example.org.': [A('192.0.2.1')] };

const rr = (name: string, data: Omit<Rr, 'name' | 'class'>): Rr => ({ name, class: 1, ...data }) as Rr;
const soa = (zone: string, ttl: number, minimum: number): Rr =>
  rr(zone, {
    type: QTYPE.SOA,
    ttl,
    soa: { primary: `ns.${zone}`, admin: `h.${zone}`, serial: 1, refresh: 1, retry: 1, expiration: 1, minimum },
  } as Omit<Rr, 'name' | 'class'>);

const metricsOf = async (port: number) => (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
const metric = (text: string, name: string) => {
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? 0 : Number(line.slice(name.length + 1));
};

describe('upstream faults: failing servers', () => {
  it.each(['refused', 'servfail'] as const)('fails over past a server that answers %s', async (behaviour) => {
    const sick = await upstream({ behaviour });
    const live = await upstream({ records });
    const f = await startForwarder([`--server=${sick.address}`, `--server=${live.address}`]);
    expect((await f.query('a.example.org', QTYPE.A)).answers.map((a) => a.address)).toEqual(['192.0.2.1']);
    expect(await f.stat('servers')).toEqual([`${sick.address} 1 1`, `${live.address} 1 0`]);
  });

  it('degrades only the suffix of a stub domain whose server is down', async () => {
    // Down: holds every question until released, then drops it.
    const dead = await upstream({ behaviour: 'drop', hold: true });
    const live = await upstream({ records: { ...records, 'x.up.test.': [A('198.51.100.7')] } });
    const f = await startForwarder([
      `--server=/down.test/${dead.address}`,
      `--server=/up.test/${live.address}`,
      `--server=${live.address}`,
      '--upstream-timeout=30s',
      '--forward-deadline=30s',
    ]);
    let downSettled = false;
    const down = f.query('x.down.test', QTYPE.A).finally(() => {
      downSettled = true;
    });
    await waitFor(() => dead.held() === 1, { what: 'the question to the dead server', seen: () => dead.held() });
    const [up, outside] = await Promise.all([f.query('x.up.test', QTYPE.A), f.query('a.example.org', QTYPE.A)]);
    // Answered while the dead server's question is still unanswered.
    expect(downSettled).toBe(false);
    // Released, the dead server fails the question: the stub domain's name alone gets SERVFAIL.
    dead.set({ behaviour: 'servfail' });
    dead.release();
    expect(up.answers.map((a) => a.address)).toEqual(['198.51.100.7']);
    expect(outside.answers.map((a) => a.address)).toEqual(['192.0.2.1']);
    expect((await down).flags.rcode).toBe(RCODE.SERVFAIL);
  });
});

// The test upstream plays a server off the host: a socket per query, as those get
// (--kept-loopback-sockets=false; servers on loopback get kept sockets, which no one off the host
// can reach).
describe('upstream faults: forged replies', () => {
  it('gives an attacker who learns our source ports nothing: forged replies sprayed at them reach no socket of ours', async () => {
    const up = await upstream({ records: { 'victim.example.org.': [A('192.0.2.10')] }, negativeTtl: 0 });
    const f = await startForwarder([
      `--server=${up.address}`,
      '--upstream-timeout=30s',
      '--forward-deadline=30s',
      '--kept-loopback-sockets=false',
    ]);
    // The attacker asks names of a domain it controls through us, and reads the source ports.
    for (let i = 0; i < 20; i++) await f.query(`n${i}.attacker.example.org`, QTYPE.A);
    const learned = new Set(up.queries.map((q) => q.port));
    // Fresh random ports: the kernel may hand one out twice by chance (20 of ~28,000: under 1 %).
    expect(learned.size).toBeGreaterThanOrEqual(18);
    // A victim's question goes out; the upstream holds it while the attacker sprays forged answers,
    // a thousand IDs at each learned port. A port of ours still open would see them (and count them).
    up.set({ hold: true });
    const victim = f.query('victim.example.org', QTYPE.A, { timeoutMs: 30_000 });
    await waitFor(() => up.held() === 1, { what: 'the victim question held upstream', seen: () => up.held() });
    // The victim's port is one the kernel picked at random; should it be a learned one again (a
    // chance of 20 in ~28,000), the attacker knew nothing: it could have guessed that port as well.
    // What is tested is that the ports it learned tell it nothing, so that one is left out.
    const victimPort = up.queries.at(-1)?.port as number;
    const sprayer = await rawClient(0);
    const forged = buildBareResponse(parseQueryOf('victim.example.org'), RCODE.NXDOMAIN);
    for (const port of [...learned].filter((p) => p !== victimPort)) {
      for (let i = 0; i < 1000; i++) {
        forged.writeUInt16BE((i * 65) & 0xffff, 0);
        sprayer.sendTo(forged, port);
      }
      await new Promise((r) => setImmediate(r));
    }
    // The spray is out (a barrier: a query answered by the forwarder itself, after it), counted nowhere.
    await f.stat('hits');
    expect(f.forwarder.rejectedReplies()).toBe(0);
    up.release();
    expect((await victim).answers.map((a) => a.address)).toEqual(['192.0.2.10']);
    expect((await f.query('victim.example.org', QTYPE.A)).answers.map((a) => a.address)).toEqual(['192.0.2.10']);
    sprayer.close();
  });

  it('takes none of 65,536 forged replies sprayed at an outstanding query, and counts them', async () => {
    const up = await upstream({ records, spoof: 'spray' });
    const f = await startForwarder([
      `--server=${up.address}`,
      '--upstream-timeout=3s',
      '--forward-deadline=4s',
      '--kept-loopback-sockets=false',
    ]);
    const reply = await f.query('a.example.org', QTYPE.A, { timeoutMs: 8000 });
    expect(reply.flags.rcode).toBe(RCODE.NOERROR);
    expect(reply.answers.map((a) => a.address)).toEqual(['192.0.2.1']);
    // Loopback keeps most of the burst; what the kernel dropped never reached us at all.
    expect(f.forwarder.rejectedReplies()).toBeGreaterThan(10_000);
    const text = await metricsOf(f.metricsPort);
    expect(metric(text, 'clusterdns_forwarder_rejected_replies_total{reason="source"}')).toBeGreaterThan(10_000);
    // The cached answer is the real one.
    expect((await f.query('a.example.org', QTYPE.A)).answers.map((a) => a.address)).toEqual(['192.0.2.1']);
    expect(up.queries).toHaveLength(1);
  }, 20_000);

  it('ignores a NOTIFY from an address that is not the zone’s server: REFUSED, counted, the cache untouched', async () => {
    const zone = await upstream({ records: { 'a.cluster.local.': [A('10.96.0.1')] } });
    const f = await startForwarder([`--server=/cluster.local/${zone.address}`]);
    expect((await f.query('a.cluster.local', QTYPE.A)).answers).toHaveLength(1);
    const spoofer = dgram.createSocket('udp4');
    await new Promise<void>((r) => spoofer.bind(0, '127.0.0.2', () => r()));
    const answer = new Promise<Buffer>((r) => spoofer.once('message', (m) => r(m)));
    spoofer.send(buildNotify(0x5151, toFqdn('cluster.local')), f.port, '127.0.0.1');
    const refused = await answer;
    spoofer.close();
    expect(refused.readUInt16BE(2) & 0xf).toBe(RCODE.REFUSED);
    expect(await metricsOf(f.metricsPort)).toMatch(
      /^clusterdns_forwarder_notifies_received_total\{result="refused"\} 1$/m,
    );
    expect((await f.query('a.cluster.local', QTYPE.A)).answers).toHaveLength(1);
    expect(zone.queries).toHaveLength(1);
  });
});

describe('upstream faults: what the cache refuses or corrects', () => {
  it('never caches a truncated answer it could not complete over TCP', async () => {
    const up = await upstream({ records, truncateUdp: true, refuseTcp: true });
    const f = await startForwarder([`--server=${up.address}`, '--upstream-timeout=300ms', '--forward-deadline=1s']);
    expect((await f.query('a.example.org', QTYPE.A)).flags.rcode).toBe(RCODE.SERVFAIL);
    up.set({ refuseTcp: false });
    const reply = await f.query('a.example.org', QTYPE.A);
    expect(reply.flags.tc).toBe(false);
    expect(reply.answers.map((a) => a.address)).toEqual(['192.0.2.1']);
    expect(up.queries.map((q) => q.transport)).toEqual(['udp', 'tcp', 'udp', 'tcp']);
  });

  it('keeps an NXDOMAIN without an SOA only for --neg-ttl, and not at all without it', async () => {
    const script = (q: ParsedQuery) => buildBareResponse(q, RCODE.NXDOMAIN);
    const bare = await upstream({ script });
    const plain = await startForwarder([`--server=${bare.address}`]);
    for (let i = 0; i < 2; i++)
      expect((await plain.query('gone.example.org', QTYPE.A)).flags.rcode).toBe(RCODE.NXDOMAIN);
    expect(bare.queries).toHaveLength(2);

    const capped = await upstream({ script });
    const f = await startForwarder([`--server=${capped.address}`, '--neg-ttl=5']);
    for (let i = 0; i < 2; i++) expect((await f.query('gone.example.org', QTYPE.A)).flags.rcode).toBe(RCODE.NXDOMAIN);
    expect(capped.queries).toHaveLength(1);
    f.clock.advance(6000);
    await f.query('gone.example.org', QTYPE.A);
    expect(capped.queries).toHaveLength(2);
  });

  it('caps a TTL of 2^31-1 at 7 days and a huge SOA minimum at 3 hours, and reads a TTL of 2^31 or more as 0', async () => {
    const up = await upstream({
      script: (q) => {
        if (q.qname.startsWith('forever')) return replyTo(q, { answers: [rr(q.qname, A('192.0.2.9', 0x7fffffff))] });
        if (q.qname.startsWith('negative'))
          return replyTo(q, { rcode: RCODE.NXDOMAIN, authorities: [soa('example.org.', 0x7fffffff, 0x7fffffff)] });
        return replyTo(q, { answers: [rr(q.qname, A('192.0.2.10', 0x80000000))] });
      },
    });
    const f = await startForwarder([`--server=${up.address}`]);
    const forever = await f.query('forever.example.org', QTYPE.A);
    expect(forever.answers[0]?.ttl).toBe(604_800);
    f.clock.advance(604_801_000);
    await f.query('forever.example.org', QTYPE.A);
    expect(up.queries.filter((q) => q.name === 'forever.example.org.')).toHaveLength(2);

    await f.query('negative.example.org', QTYPE.A);
    f.clock.advance(10_799_000);
    await f.query('negative.example.org', QTYPE.A);
    expect(up.queries.filter((q) => q.name === 'negative.example.org.')).toHaveLength(1);
    f.clock.advance(2000);
    await f.query('negative.example.org', QTYPE.A);
    expect(up.queries.filter((q) => q.name === 'negative.example.org.')).toHaveLength(2);

    for (let i = 0; i < 2; i++) expect((await f.query('sign.example.org', QTYPE.A)).answers[0]?.ttl).toBe(0);
    expect(up.queries.filter((q) => q.name === 'sign.example.org.')).toHaveLength(2);
  });

  it('gives every record of an answer the smallest TTL among them', async () => {
    const up = await upstream({
      script: (q) => replyTo(q, { answers: [rr(q.qname, A('192.0.2.1', 300)), rr(q.qname, A('192.0.2.2', 10))] }),
    });
    const f = await startForwarder([`--server=${up.address}`]);
    for (let i = 0; i < 2; i++) {
      const reply = await f.query('mixed.example.org', QTYPE.A);
      expect(reply.answers.map((a) => a.ttl)).toEqual([10, 10]);
    }
  });

  it('keeps out of the cache and the reply every record that does not pertain to the question', async () => {
    const up = await upstream({
      script: (q) => {
        if (q.qname !== 'a.example.org.')
          return replyTo(q, { rcode: RCODE.NXDOMAIN, authorities: [soa('test.', 60, 60)] });
        return replyTo(q, {
          answers: [rr('a.example.org', A('192.0.2.1')), rr('www.bank.test', A('6.6.6.6'))],
          authorities: [
            rr('example.org', { type: QTYPE.NS, ttl: 60, target: 'ns1.example.org' } as Omit<Rr, 'name' | 'class'>),
            rr('bank.test', { type: QTYPE.NS, ttl: 60, target: 'ns.evil.test' } as Omit<Rr, 'name' | 'class'>),
          ],
          additionals: [
            rr('ns1.example.org', A('192.0.2.53')),
            rr('www.bank.test', A('6.6.6.6')),
            rr('ns.evil.test', A('6.6.6.7')),
          ],
        });
      },
    });
    const f = await startForwarder([`--server=${up.address}`]);
    for (let i = 0; i < 2; i++) {
      const reply = await f.query('a.example.org', QTYPE.A);
      expect(reply.answers.map((a) => `${a.name} ${a.address}`)).toEqual(['a.example.org. 192.0.2.1']);
      expect(reply.authorities.map((a) => `${a.name} ${a.target}`)).toEqual(['example.org. ns1.example.org.']);
      expect(reply.additionals.filter((a) => a.type === QTYPE.A).map((a) => a.name)).toEqual(['ns1.example.org.']);
    }
    // The planted name is asked for, not served from the planted record.
    expect((await f.query('www.bank.test', QTYPE.A)).flags.rcode).toBe(RCODE.NXDOMAIN);
    expect(up.queries.map((q) => q.name)).toEqual(['a.example.org.', 'www.bank.test.']);
  });

  it('stops following a CNAME loop on a stub route and answers what it has', async () => {
    const cname = (target: string) => ({ type: QTYPE.CNAME, target, ttl: 60 });
    const up = await upstream({
      records: { 'a.stub.test.': [cname('b.stub.test.')], 'b.stub.test.': [cname('a.stub.test.')] },
    });
    const f = await startForwarder([`--server=/stub.test/${up.address}`]);
    const reply = await f.query('a.stub.test', QTYPE.A);
    expect(reply.flags.rcode).toBe(RCODE.NOERROR);
    expect(reply.answers.every((a) => a.type === QTYPE.CNAME)).toBe(true);
    expect(up.queries.length).toBeLessThanOrEqual(9);
  });
});

describe('upstream faults: load', () => {
  it('holds the in-flight cap against a slow upstream: the excess is refused at once and memory stays flat', async () => {
    const up = await upstream({ script: (q) => replyTo(q, { answers: [rr(q.qname, A('192.0.2.1'))] }) });
    // The cap alone: no newer question may push out a held one (--jostle-timeout), three thousand
    // misses from one address are past its fair rate (--client-qps), and every one must be read:
    // this process is client and server at once, and on a busy machine its queue can look old
    // enough to shed (--shed-after).
    const f = await startForwarder([
      `--server=${up.address}`,
      '--dns-forward-max=50',
      '--cache-size=0',
      '--upstream-timeout=30s',
      '--forward-deadline=30s',
      '--jostle-timeout=60s',
      '--client-qps=0',
      '--shed-after=0',
    ]);
    const client = await rawClient(f.port);
    // Each wave: 3,000 misses while the upstream holds every question it gets; the 2,950 past the
    // cap must be refused while it still holds the 50, that is before it answered anything.
    const wave = async (w: number) => {
      up.set({ hold: true });
      const ids = Array.from({ length: 3000 }, (_, i) => i);
      let refused = 0;
      const replies = ids.map((i) =>
        client.ask(query([`n${w}x${i}`, 'example', 'org']), i).then((r) => {
          if ((r.readUInt16BE(2) & 0xf) === RCODE.REFUSED) refused++;
          return r.readUInt16BE(2) & 0xf;
        }),
      );
      await waitFor(() => refused === 2950 && up.held() === 50, {
        what: '2,950 refused while the upstream holds 50',
        seen: () => ({ refused, held: up.held() }),
      });
      up.release();
      return Promise.all(replies);
    };
    const first = await wave(0);
    const heapAfterFirst = process.memoryUsage().heapUsed;
    expect(first.filter((r) => r === RCODE.NOERROR)).toHaveLength(50);
    expect(first.filter((r) => r === RCODE.REFUSED)).toHaveLength(2950);
    for (let w = 1; w < 4; w++) await wave(w);
    expect(up.queries).toHaveLength(200);
    expect(process.memoryUsage().heapUsed - heapAfterFirst).toBeLessThan(64 * 1024 * 1024);
    client.close();
  }, 30_000);

  it('sends 10,000 concurrent identical misses upstream once, each answered with its own ID and case; a failure fails all and the next asks again', async () => {
    // The upstream holds its one question until all 10,000 have joined it, however long sending takes.
    const up = await upstream({ records: { ...records, 'b.example.org.': [A('192.0.2.2')] }, hold: true });
    // Twenty thousand queries from one address in a few seconds: past any client's fair rate, and
    // each must be read, however old the busy test process makes its queue look (--shed-after).
    const f = await startForwarder([
      `--server=${up.address}`,
      '--upstream-timeout=30s',
      '--forward-deadline=30s',
      '--client-qps=0',
      '--shed-after=0',
    ]);
    const clients = await Promise.all(Array.from({ length: 20 }, () => rawClient(f.port)));
    const received = () => f.forwarder.counters.hits + f.forwarder.counters.misses;
    const storm = async (name: string) => {
      const sent: Array<Promise<{ sent: Buffer; reply: Buffer }>> = [];
      const before = received();
      for (let i = 0; i < 10_000; i++) {
        const labels = name
          .split('.')
          .map((l) => [...l].map((c) => (Math.random() < 0.5 ? c.toUpperCase() : c)).join(''));
        const q = query(labels);
        const client = clients[i % clients.length] as Awaited<ReturnType<typeof rawClient>>;
        const id = Math.floor(i / clients.length);
        sent.push(client.ask(q, id, 60_000).then((reply) => ({ sent: withId(q, id), reply })));
        // A few hundred at a time, each batch read before the next, so no socket buffer overflows.
        if (i % 500 === 499)
          await waitFor(() => received() - before === i + 1, {
            what: `the forwarder to read ${i + 1} queries`,
            seen: () => received() - before,
          });
      }
      await waitFor(() => up.held() === 1, { what: 'the one question held upstream', seen: () => up.held() });
      up.release();
      return Promise.all(sent);
    };
    const answered = await storm('a.example.org');
    expect(up.queries).toHaveLength(1);
    for (const { sent, reply } of answered) {
      expect(reply.readUInt16BE(0)).toBe(sent.readUInt16BE(0));
      // The question comes back in the asker's own case, octet for octet.
      expect(reply.subarray(HEADER_BYTES, sent.length)).toEqual(sent.subarray(HEADER_BYTES));
      expect(decodeMessage(reply).answers.map((a) => a.address)).toEqual(['192.0.2.1']);
    }

    // The one question fails (SERVFAIL from the only server): every query that joined it fails.
    up.set({ behaviour: 'servfail', hold: true });
    const failed = await storm('b.example.org');
    expect(failed.every(({ reply }) => (reply.readUInt16BE(2) & 0xf) === RCODE.SERVFAIL)).toBe(true);
    expect(up.queries.filter((q) => q.name === 'b.example.org.')).toHaveLength(1);
    up.set({ behaviour: 'answer' });
    expect((await f.query('b.example.org', QTYPE.A)).answers.map((a) => a.address)).toEqual(['192.0.2.2']);
    expect(up.queries.filter((q) => q.name === 'b.example.org.')).toHaveLength(2);
    for (const c of clients) c.close();
  }, 60_000);
});

const withId = (message: Buffer, id: number) => {
  const q = Buffer.from(message);
  q.writeUInt16BE(id, 0);
  return q;
};

/** A UDP socket that sends raw queries with the ID given and pairs each reply with its query by ID. */
async function rawClient(port: number) {
  const socket = dgram.createSocket({ type: 'udp4', recvBufferSize: 4 * 1024 * 1024 });
  await new Promise<void>((r) => socket.bind(0, '127.0.0.1', () => r()));
  const waiting = new Map<number, (reply: Buffer) => void>();
  socket.on('message', (m) => {
    if (m.length < HEADER_BYTES) return;
    const id = m.readUInt16BE(0);
    waiting.get(id)?.(m);
    waiting.delete(id);
  });
  return {
    ask(message: Buffer, id: number, timeoutMs = 15_000): Promise<Buffer> {
      const q = withId(message, id);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no reply to query ${id} within ${timeoutMs} ms`)), timeoutMs);
        waiting.set(id, (reply) => {
          clearTimeout(timer);
          resolve(reply);
        });
        socket.send(q, port, '127.0.0.1');
      });
    },
    /** Sends a message as it is to another port on loopback (a spray, a forgery). */
    sendTo: (message: Buffer, to: number) => socket.send(message, to, '127.0.0.1'),
    close: () => socket.close(),
  };
}

/** A question as our forwarder asks it upstream, parsed (to forge an answer to it). */
const parseQueryOf = (name: string) => parseQuery(encodeMessage(buildQueryMessage(0, name, QTYPE.A)));

describe('hostile octets in names', () => {
  it('logs a name with NUL, dot, space and high octets escaped, and puts no query name in a metric label', async () => {
    const up = await upstream({ records });
    const f = await startForwarder([`--server=${up.address}`, '--log-queries']);
    const label = Buffer.from([0x61, 0x00, 0x2e, 0x20, 0x80, 0xff, 0x0a, 0x22]);
    const client = await rawClient(f.port);
    const reply = await client.ask(query([label as unknown as string, 'example', 'org']), 77);
    client.close();
    expect(reply.readUInt16BE(2) & 0xf).toBe(RCODE.NXDOMAIN);
    const logged = f.logs.find((l) => l.msg === 'query' && String(l.qname).endsWith('example.org.'));
    const qname = String(logged?.qname);
    // RFC 1035 §5.1 presentation: \DDD for octets that are not printable, \. for a dot in a label.
    expect(qname).toMatch(/^[\x21-\x7e]+$/);
    expect(qname).toContain('\\000');
    expect(qname).toContain('\\.');
    expect(qname).toContain('\\255');
    const metrics = await metricsOf(f.metricsPort);
    expect(metrics).not.toContain('example.org');
    const labels = metrics
      .split('\n')
      .filter((l) => !l.startsWith('#'))
      .map((l) => /\{(.*)\}/.exec(l)?.[1] ?? '');
    expect(labels.filter((l) => /[^\x20-\x7e]/.test(l))).toEqual([]);
  });
});
