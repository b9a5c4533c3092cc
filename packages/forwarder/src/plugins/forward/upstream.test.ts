import { QTYPE, RCODE, toFqdn } from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import { fakeUpstreams } from '../../testing/test-upstreams.js';
import { buildUpstreamQuery, forwardQuery, UpstreamsFailedError } from './upstream.js';

const question = (name: string) => ({
  name: toFqdn(name),
  qtype: QTYPE.A,
  qclass: 1,
  dnssecOk: false,
  checkingDisabled: false,
});
const A = (name: string, address: string) => ({ name, type: QTYPE.A, class: 1, ttl: 60, address }) as const;
const nameOf = (query: Buffer) => query.subarray(12, query.indexOf(0, 12)).toString('latin1');
const S1 = { host: '192.0.2.1', port: 53 };
const S2 = { host: '192.0.2.2', port: 53 };

describe('upstream queries', () => {
  it('asks with a random ID, RD, EDNS0 and, with 0x20, a random case of the same name', () => {
    const plain = buildUpstreamQuery(question('www.longer-name.example.org'));
    expect(nameOf(plain)).toBe('\x03www\x0blonger-name\x07example\x03org');
    const spellings = new Set(
      Array.from({ length: 20 }, () => nameOf(buildUpstreamQuery(question('www.longer-name.example.org'), true))),
    );
    // 24 letters: twenty draws are all the same with probability 2^-456.
    expect(spellings.size).toBeGreaterThan(15);
    for (const s of spellings) expect(s.toLowerCase()).toBe(nameOf(plain));
    // Digits and dashes are not letters: they never change.
    const digits = nameOf(buildUpstreamQuery(question('10-0-0-1.pod.example'), true));
    expect(digits.slice(1, 9)).toBe('10-0-0-1');
  });

  it('tries the next server after SERVFAIL or silence, and counts queries and failures per server', async () => {
    const up = fakeUpstreams((server) =>
      server === '192.0.2.1#53' ? { rcode: RCODE.SERVFAIL } : { answers: [A('a.example.org.', '192.0.2.9')] },
    );
    const reply = await forwardQuery([S1, S2], question('a.example.org'), up.options());
    expect(reply.readUInt16BE(2) & 0xf).toBe(RCODE.NOERROR);
    expect([...up.stats.servers()]).toEqual([
      ['192.0.2.1#53', { queries: 1, failures: 1 }],
      ['192.0.2.2#53', { queries: 1, failures: 0 }],
    ]);
    const silent = fakeUpstreams(() => 'silent');
    await expect(forwardQuery([S1, S2], question('a.example.org'), silent.options())).rejects.toBeInstanceOf(
      UpstreamsFailedError,
    );
    expect(silent.stats.lastAnswered.get('192.0.2.2#53')).toBe(false);
  });

  it('with 0x20, asks a server that does not echo the case again in plain case at once, and so for an hour', async () => {
    const up = fakeUpstreams(() => ({ answers: [A('a.example.org.', '192.0.2.9')], lowercase: true }));
    const options = up.options({ randomCase: true });
    // 21 letters: the random case is all lower case, and so echoed, once in 2^21.
    const reply = await forwardQuery([S1], question('a.longer-name.example.org'), options);
    expect(reply.readUInt16BE(2) & 0xf).toBe(RCODE.NOERROR);
    expect(up.sent.map((s) => nameOf(s.query) === '\x01a\x0blonger-name\x07example\x03org')).toEqual([false, true]);
    expect(up.stats.rejectedByReason.get('case')).toBe(1);
    expect(up.stats.isCaseBlind('192.0.2.1#53', 1_000_000)).toBe(true);
    await forwardQuery([S1], question('b.example.org'), options);
    expect(nameOf(up.sent.at(-1)?.query as Buffer)).toBe('\x01b\x07example\x03org');
    expect(up.sent).toHaveLength(3);
    // An hour on, it is tried in a random case again.
    expect(up.stats.isCaseBlind('192.0.2.1#53', 1_000_000 + 3_600_001)).toBe(false);
  });

  it('with 0x20, takes a reply that echoes the case, and keeps asking that server in a random case', async () => {
    const up = fakeUpstreams(() => ({ answers: [A('a.example.org.', '192.0.2.9')] }));
    const options = up.options({ randomCase: true });
    for (let i = 0; i < 5; i++) await forwardQuery([S1], question('a.longer-name.example.org'), options);
    expect(up.sent).toHaveLength(5);
    expect(up.stats.isCaseBlind('192.0.2.1#53', 1_000_000)).toBe(false);
    expect(new Set(up.sent.map((s) => nameOf(s.query))).size).toBeGreaterThan(1);
  });
});
