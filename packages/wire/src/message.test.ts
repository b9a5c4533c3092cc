import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { FLAG, QTYPE } from './constants.js';
import { QueryFormatError } from './errors.js';
import { type DnsMessage, decodeMessage, encodeMessage } from './message.js';
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
