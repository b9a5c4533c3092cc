import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { FLAG, QTYPE } from './constants.js';
import { QueryFormatError } from './errors.js';
import { canonicalIpv6 } from './ip-address.js';
import { type DnsMessage, decodeMessage, encodeMessage } from './message.js';
import { MessageWriter } from './message-writer.js';
import { copyRecord } from './record-copy.js';
import type { Rr } from './records.js';
import { scanResponse } from './response-scan.js';
import { truncateReply } from './truncate.js';

const reply = (answers: Rr[], authorities: Rr[] = [], additionals: Rr[] = []): DnsMessage => ({
  id: 7,
  flags: { qr: true, opcode: 0, aa: true, tc: false, rd: true, ra: false, ad: false, cd: false, rcode: 0 },
  questions: [{ name: 'x.example.org.', type: QTYPE.ANY, class: 1 }],
  answers,
  authorities,
  additionals,
});
const a = (i: number): Rr => ({ name: 'x.example.org.', type: QTYPE.A, class: 1, ttl: 30, address: `10.0.0.${i}` });

describe('decodeMessage', () => {
  it('reads every modelled type as encodeMessage wrote it', () => {
    const rrs: Rr[] = [
      a(1),
      { name: 'x.example.org.', type: QTYPE.AAAA, class: 1, ttl: 30, address: 'fd00::1' },
      { name: 'x.example.org.', type: QTYPE.CNAME, class: 1, ttl: 30, target: 'y.example.org.' },
      { name: 'x.example.org.', type: QTYPE.MX, class: 1, ttl: 30, priority: 10, target: 'mx.example.org.' },
      { name: 'x.example.org.', type: QTYPE.TXT, class: 1, ttl: 30, text: ['one', 'two'] },
      {
        name: '_h._tcp.x.example.org.',
        type: QTYPE.SRV,
        class: 1,
        ttl: 30,
        priority: 1,
        weight: 2,
        port: 3,
        target: 'x.example.org.',
      },
    ];
    const soa: Rr = {
      name: 'example.org.',
      type: QTYPE.SOA,
      class: 1,
      ttl: 60,
      soa: {
        primary: 'ns.example.org.',
        admin: 'h.example.org.',
        serial: 9,
        refresh: 1,
        retry: 2,
        expiration: 3,
        minimum: 4,
      },
    };
    const decoded = decodeMessage(encodeMessage(reply(rrs, [soa])));
    expect(decoded.answers).toEqual(rrs);
    expect(decoded.authorities).toEqual([soa]);
  });

  it('keeps a record of a type it does not model as its raw data (RFC 3597)', () => {
    const wire = encodeMessage(reply([a(1)]));
    // Retype the record to TYPE65 (HTTPS): its 4 data octets must come back unchanged.
    const scanned = scanResponse(wire);
    wire.writeUInt16BE(65, (scanned.records[0]?.ttlOffset ?? 0) - 4);
    const [rr] = decodeMessage(wire).answers;
    expect(rr).toMatchObject({ type: 65, rdata: Buffer.from([10, 0, 0, 1]) });
  });

  it.each([
    ['a count larger than the records present', (w: Buffer) => w.writeUInt16BE(5, 6)],
    ['data running past the message', (w: Buffer) => w.writeUInt16BE(200, w.length - 6)],
    ['A data of 5 octets', (w: Buffer) => w.writeUInt16BE(5, w.length - 6)],
  ])('refuses %s', (_what, damage) => {
    const wire = encodeMessage(reply([a(1)]));
    damage(wire);
    expect(() => decodeMessage(wire)).toThrow(QueryFormatError);
  });

  it('decodes, encodes and decodes to the same message (property)', () => {
    const record = fc.oneof(
      fc.ipV4().map((ip): Rr => ({ name: 'h.example.org.', type: QTYPE.A, class: 1, ttl: 30, address: ip })),
      fc
        .array(fc.string({ minLength: 0, maxLength: 20 }), { minLength: 1, maxLength: 3 })
        .map((text): Rr => ({ name: 'h.example.org.', type: QTYPE.TXT, class: 1, ttl: 5, text })),
      fc.tuple(fc.nat(65535), fc.nat(65535), fc.nat(65535)).map(
        ([p, w, port]): Rr => ({
          name: 'h.example.org.',
          type: QTYPE.SRV,
          class: 1,
          ttl: 5,
          priority: p,
          weight: w,
          port,
          target: 'a.example.org.',
        }),
      ),
    );
    fc.assert(
      fc.property(fc.array(record, { maxLength: 12 }), (answers) => {
        const once = decodeMessage(encodeMessage(reply(answers)));
        const twice = decodeMessage(encodeMessage({ ...once, answers: once.answers as Rr[] } as DnsMessage));
        expect(twice).toEqual(once);
      }),
      { numRuns: 300 },
    );
  });
});

describe('truncateReply', () => {
  const big = encodeMessage(reply(Array.from({ length: 60 }, (_, i) => a(i))));

  it('keeps whole answers in order and sets TC when answers had to go', () => {
    const cut = truncateReply(big, 300);
    expect(cut.length).toBeLessThanOrEqual(300);
    const decoded = decodeMessage(cut);
    expect(decoded.flags.tc).toBe(true);
    expect(decoded.answers.map((r) => r.address)).toEqual(
      Array.from({ length: decoded.answers.length }, (_, i) => `10.0.0.${i}`),
    );
    expect(decoded.answers.length).toBeGreaterThan(10);
  });

  it('drops additional records without setting TC (RFC 2181 §9)', () => {
    const glue = Array.from({ length: 40 }, (_, i) => ({ ...a(i), name: `t${i}.example.org.` }));
    const msg = encodeMessage(reply([a(1)], [], glue));
    const decoded = decodeMessage(truncateReply(msg, 200));
    expect(decoded.flags.tc).toBe(false);
    expect(decoded.answers).toHaveLength(1);
    expect(decoded.additionals.length).toBeLessThan(40);
  });

  it('returns a reply that fits unchanged', () => {
    expect(truncateReply(big, 65535)).toBe(big);
    expect(big.readUInt16BE(2) & FLAG.TC).toBe(0);
  });
});

describe('copyRecord', () => {
  it('writes compressed names out in full, so the record stands in another message', () => {
    const msg = encodeMessage(
      reply([{ name: 'x.example.org.', type: QTYPE.CNAME, class: 1, ttl: 30, target: 'y.example.org.' }]),
    );
    const [record] = scanResponse(msg).records;
    const copied = copyRecord(msg, record as NonNullable<typeof record>);
    // The CNAME's owner and target were pointers into the question; now they are spelt out.
    expect(copied.length).toBeGreaterThan((record?.end ?? 0) - (record?.start ?? 0));
    const standalone = Buffer.concat([Buffer.from('000081800000000100000000', 'hex'), copied]);
    expect(decodeMessage(standalone).answers[0]).toMatchObject({ name: 'x.example.org.', target: 'y.example.org.' });
  });
});

describe('MessageWriter', () => {
  const name = fc.constantFrom(
    'a.example.org.',
    'B.example.org.',
    'example.org.',
    'x.y.Z.example.net.',
    'a\\.b.example.org.',
  );
  const record = fc.oneof(
    fc.tuple(name, fc.ipV4()).map(([n, address]): Rr => ({ name: n, type: QTYPE.A, class: 1, ttl: 30, address })),
    fc.tuple(name, fc.ipV6()).map(([n, address]): Rr => ({ name: n, type: QTYPE.AAAA, class: 1, ttl: 30, address })),
    fc.tuple(name, name).map(([n, target]): Rr => ({ name: n, type: QTYPE.CNAME, class: 1, ttl: 7, target })),
    fc.tuple(name, name, fc.nat(65535)).map(
      ([n, target, port]): Rr => ({
        name: n,
        type: QTYPE.SRV,
        class: 1,
        ttl: 5,
        priority: 10,
        weight: 50,
        port,
        target,
      }),
    ),
    fc
      .tuple(name, fc.array(fc.string({ maxLength: 30 }), { minLength: 1, maxLength: 3 }))
      .map(([n, text]): Rr => ({ name: n, type: QTYPE.TXT, class: 1, ttl: 5, text })),
  );

  it('writes what decodes to the records it was given, for any mix of names and types (property)', () => {
    fc.assert(
      fc.property(
        name,
        fc.array(record, { maxLength: 15 }),
        fc.array(record, { maxLength: 5 }),
        (q, answers, extra) => {
          const writer = new MessageWriter().question(q, QTYPE.ANY, 1);
          for (const rr of answers) writer.record(1, rr);
          for (const rr of extra) writer.record(3, rr);
          const decoded = decodeMessage(writer.finish(9, { ...reply([]).flags }));
          expect(decoded.questions).toEqual([{ name: q, type: QTYPE.ANY, class: 1 }]);
          expect(decoded.answers).toEqual(
            answers.map((rr) => (rr.type === QTYPE.AAAA ? { ...rr, address: canonicalIpv6(rr.address) } : rr)),
          );
          expect(decoded.additionals).toHaveLength(extra.length);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('agrees with encodeMessage (dns2) on what the message says, and is no larger', () => {
    const answers = Array.from({ length: 100 }, (_, i) => ({
      name: '_grpc._tcp.h.ns.svc.cluster.local.',
      type: QTYPE.SRV,
      class: 1,
      ttl: 30,
      priority: 10,
      weight: 1,
      port: 9000,
      target: `pod-${i}.h.ns.svc.cluster.local.`,
    })) as Rr[];
    const message = {
      ...reply(answers),
      questions: [{ name: '_grpc._tcp.h.ns.svc.cluster.local.', type: QTYPE.SRV, class: 1 }],
    };
    const writer = new MessageWriter().question('_grpc._tcp.h.ns.svc.cluster.local.', QTYPE.SRV, 1);
    for (const rr of answers) writer.record(1, rr);
    const ours = writer.finish(7, message.flags);
    expect(decodeMessage(ours)).toEqual(decodeMessage(encodeMessage(message)));
  });

  it('compresses a name against one written in another case or without its root dot, and keeps the case written', () => {
    const writer = new MessageWriter().question('Web.Example.org', QTYPE.A, 1);
    const at = (name: string): Rr => ({ name, type: QTYPE.A, class: 1, ttl: 5, address: '10.0.0.1' });
    writer.record(1, at('web.example.org.')).record(1, at('WEB.EXAMPLE.ORG')).record(1, at('api.example.ORG.'));
    const wire = writer.finish(1, reply([]).flags);
    const decoded = decodeMessage(wire);
    expect(decoded.questions[0]?.name).toBe('Web.Example.org.');
    expect(decoded.answers.map((r) => r.name)).toEqual(['Web.Example.org.', 'Web.Example.org.', 'api.Example.org.']);
    // Question 12 + 17 name + 4; two answers of a pointer and 14 octets; "api" then a pointer, then 14.
    expect(wire.length).toBe(12 + 17 + 4 + 2 * (2 + 14) + (4 + 2 + 14));
  });

  it('never compresses an SRV target (RFC 2782)', () => {
    const writer = new MessageWriter().question('_h._tcp.example.org.', QTYPE.SRV, 1);
    writer.record(1, {
      name: '_h._tcp.example.org.',
      type: QTYPE.SRV,
      class: 1,
      ttl: 5,
      priority: 0,
      weight: 0,
      port: 1,
      target: 'example.org.',
    });
    const wire = writer.finish(1, reply([]).flags);
    // The target's 13 octets are spelt out at the end: 7 "example" 3 "org" 0.
    expect(wire.subarray(wire.length - 13)).toEqual(Buffer.from('076578616d706c65036f726700', 'hex'));
  });
});
