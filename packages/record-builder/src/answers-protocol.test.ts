import { buildQueryMessage, decodeMessage, encodeMessage, QTYPE, RCODE } from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import { createTestZone, group, svc } from './test-zone.js';

const Z = 'svc.cluster.local.';

function bigHeadless(count: number) {
  const t = createTestZone();
  t.state.upsertService(svc('data', 'big', { kind: 'headless' }));
  t.state.upsertGroup(
    group(
      'data',
      'big',
      Array.from({ length: count }, (_, i) => ({ ip: `10.244.${i >> 8}.${i & 255}` })),
    ),
  );
  return t;
}

describe('protocol', () => {
  it('refuses names outside its zones, without AA', () => {
    const reply = createTestZone().ask('example.org.', QTYPE.A);
    expect(reply.flags).toMatchObject({ rcode: RCODE.REFUSED, aa: false });
  });

  it('answers SERVFAIL for cluster names until synced, never NXDOMAIN', () => {
    const t = createTestZone({ ready: false });
    expect(t.ask(`nope.shop.${Z}`).flags.rcode).toBe(RCODE.SERVFAIL);
    t.setReady(true);
    expect(t.ask(`nope.shop.${Z}`).flags.rcode).toBe(RCODE.NXDOMAIN);
  });

  it('echoes the question as asked and matches it case-insensitively', () => {
    const t = createTestZone();
    t.state.upsertService(svc('shop', 'web', { clusterIPs: ['10.96.0.20'] }));
    const reply = t.ask('WeB.ShOp.SVC.cluster.LOCAL.', QTYPE.A);
    expect(reply.questions[0]?.name).toBe('WeB.ShOp.SVC.cluster.LOCAL.');
    expect(reply.answers.map((r) => r.address)).toEqual(['10.96.0.20']);
    expect(reply.id).toBe(4242);
  });

  it('keeps the whole records that fit in 512 octets without EDNS, with TC, and sends all over TCP', () => {
    const t = bigHeadless(100);
    const udp = t.ask(`big.data.${Z}`, QTYPE.A);
    expect(udp.flags).toMatchObject({ tc: true, aa: true, rcode: RCODE.NOERROR });
    // A client that never retries over TCP (musl < 1.2.4, busybox) still gets addresses.
    expect(udp.answers.length).toBeGreaterThan(20);
    expect(udp.answers.every((r) => r.type === QTYPE.A && r.address?.startsWith('10.244.'))).toBe(true);
    const tcp = t.ask(`big.data.${Z}`, QTYPE.A, { transport: 'tcp' });
    expect(tcp.flags.tc).toBe(false);
    expect(tcp.answers).toHaveLength(100);
  });

  it('honours the EDNS0 buffer size up to its own cap of 1232, and echoes an OPT record', () => {
    const t = bigHeadless(100);
    const raw = (udpSize: number) =>
      encodeMessage(buildQueryMessage(5, `big.data.${Z}`, QTYPE.A, { edns: { udpSize } }));
    const asked4096 = t.handle(raw(4096), {
      transport: 'udp',
      remoteAddress: '127.0.0.1',
      remotePort: 1,
      family: 4,
    }) as Buffer;
    expect(asked4096.length).toBeLessThanOrEqual(1232);
    const capped = decodeMessage(asked4096);
    expect(capped.flags.tc).toBe(true);
    expect(capped.answers.length).toBeGreaterThan(60);
    expect(capped.additionals.map((r) => r.type)).toEqual([QTYPE.OPT]);
    // Our OPT advertises our own size, not the client's.
    expect(asked4096.readUInt16BE(asked4096.length - 8)).toBe(1232);
    const small = t.ask(`big.data.${Z}`, QTYPE.A, { edns: { udpSize: 600 } });
    expect(small.flags.tc).toBe(true);
    expect(small.additionals.map((r) => r.type)).toEqual([QTYPE.OPT]);
  });

  it('answers BADVERS for EDNS version 1', () => {
    const t = createTestZone();
    const raw = encodeMessage(buildQueryMessage(1, `a.${Z}`, QTYPE.A, { edns: { udpSize: 1232 } }));
    raw[raw.length - 5] = 1;
    const reply = t.ask('', QTYPE.A, { raw });
    expect(reply.flags.rcode).toBe(RCODE.BADVERS);
  });

  it('answers NOTIMP for an opcode other than QUERY', () => {
    const t = createTestZone();
    const raw = encodeMessage(buildQueryMessage(1, `a.${Z}`, QTYPE.A));
    raw.writeUInt16BE(raw.readUInt16BE(2) | (2 << 11), 2);
    expect(t.ask('', QTYPE.A, { raw }).flags.rcode).toBe(RCODE.NOTIMP);
  });

  it('answers FORMERR for an unreadable question and drops what has no header', () => {
    const t = createTestZone();
    const reply = t.handle(Buffer.from('abcd01000001000000000000ff', 'hex'), {
      transport: 'udp',
      remoteAddress: '127.0.0.1',
      remotePort: 1,
      family: 4,
    });
    expect(decodeMessage(reply as Buffer).flags.rcode).toBe(RCODE.FORMERR);
    expect(
      t.handle(Buffer.from('ab', 'hex'), { transport: 'udp', remoteAddress: '127.0.0.1', remotePort: 1, family: 4 }),
    ).toBeUndefined();
  });

  it.each(['udp', 'tcp'] as const)('answers ANY with one RRset, the addresses, over %s (RFC 8482)', (transport) => {
    const t = createTestZone();
    t.state.upsertService(
      svc('shop', 'web', {
        clusterIPs: ['10.96.0.20', 'fd00::20'],
        ports: [{ name: 'http', port: 80, protocol: 'tcp' }],
      }),
    );
    const reply = t.ask(`web.shop.${Z}`, QTYPE.ANY, { transport });
    expect(reply.flags.rcode).toBe(RCODE.NOERROR);
    expect(reply.answers.map((r) => [r.type, 'address' in r ? r.address : ''])).toEqual([[QTYPE.A, '10.96.0.20']]);
    expect(reply.additionals.filter((r) => r.type !== QTYPE.OPT)).toEqual([]);
    const apex = t.ask('cluster.local.', QTYPE.ANY, { transport });
    expect(apex.answers.map((r) => r.type)).toEqual([QTYPE.SOA]);
    const missing = t.ask(`nope.shop.${Z}`, QTYPE.ANY, { transport });
    expect([missing.flags.rcode, missing.answers.length]).toEqual([RCODE.NXDOMAIN, 0]);
  });

  it('transfers the zone over TCP to allowed clients only', () => {
    const t = createTestZone({ transferTo: ['10.0.0.5'] });
    t.state.upsertService(svc('shop', 'web', { clusterIPs: ['10.96.0.20'] }));
    expect(t.ask('cluster.local.', QTYPE.AXFR, { transport: 'tcp', remote: '10.0.0.9' }).flags.rcode).toBe(
      RCODE.REFUSED,
    );
    expect(t.ask('cluster.local.', QTYPE.AXFR, { transport: 'udp', remote: '10.0.0.5' }).flags.rcode).toBe(
      RCODE.REFUSED,
    );
    const raw = encodeMessage(buildQueryMessage(9, 'cluster.local.', QTYPE.AXFR));
    const replies = t.messages(raw, '10.0.0.5');
    const answers = replies.flatMap((b) => decodeMessage(b).answers);
    expect(answers[0]?.type).toBe(QTYPE.SOA);
    expect(answers.at(-1)?.type).toBe(QTYPE.SOA);
    expect(answers.some((r) => r.name === `web.shop.${Z}` && r.address === '10.96.0.20')).toBe(true);
    expect(answers.some((r) => r.name.endsWith('in-addr.arpa.'))).toBe(false);
  });

  it('splits a large zone transfer into several messages under 64 KiB', () => {
    const t = createTestZone({ transferTo: ['10.0.0.5'] });
    for (let i = 0; i < 600; i++)
      t.state.upsertService(svc('ns', `s${i}`, { clusterIPs: [`10.96.${i >> 8}.${i & 255}`] }));
    const raw = encodeMessage(buildQueryMessage(9, 'cluster.local.', QTYPE.AXFR));
    const replies = t.messages(raw, '10.0.0.5');
    expect(replies.length).toBeGreaterThan(1);
    expect(replies.every((b) => b.length < 65535)).toBe(true);
    expect(replies.flatMap((b) => decodeMessage(b).answers).filter((r) => r.type === QTYPE.A)).toHaveLength(600);
  });
});
