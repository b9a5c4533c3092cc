import { describe, expect, it } from 'vitest';
import { QTYPE, RCODE } from './constants.js';
import { toFqdn } from './fqdn.js';
import { buildQueryMessage, decodeMessage, encodeMessage } from './message.js';
import { writeName } from './names-on-wire.js';
import { nameHashOf, PlainQuestion, parseQuery, questionInZone, readPlainQuery, sameNameOctets } from './query.js';
import { buildBareResponse, buildHeaderOnlyResponse, finishFromTemplate, maxResponseBytes } from './response.js';

const query = (name: string, type: number, edns?: { udpSize: number; dnssecOk?: boolean }) =>
  encodeMessage(buildQueryMessage(0x1234, name, type, { edns }));

describe('parseQuery', () => {
  it('reads the question as asked and its canonical key', () => {
    const q = parseQuery(query('KuBe.Default.svc.cluster.local', QTYPE.SRV));
    expect(q).toMatchObject({
      id: 0x1234,
      qname: 'KuBe.Default.svc.cluster.local.',
      key: 'kube.default.svc.cluster.local.',
      qtype: QTYPE.SRV,
      rd: true,
      edns: undefined,
    });
  });

  it('reads EDNS0 size, version and DO', () => {
    const q = parseQuery(query('a.example.org', QTYPE.A, { udpSize: 1232, dnssecOk: true }));
    expect(q.edns).toEqual({ udpSize: 1232, version: 0, dnssecOk: true });
  });

  it.each([
    ['a short packet', Buffer.alloc(5), false],
    ['a response', Buffer.from('12348000000100000000000000000100 01'.replace(/ /g, ''), 'hex'), false],
    ['two questions', Buffer.from('123401000002000000000000', 'hex'), true],
    ['a name running off the end', Buffer.from('12340100000100000000000003616263', 'hex'), true],
    ['a label over 63 octets', Buffer.from(`123401000001000000000000${'40'}${'61'.repeat(64)}0000010001`, 'hex'), true],
    ['a pointer loop', Buffer.from('123401000001000000000000c00c00010001', 'hex'), true],
  ])('rejects %s (FORMERR possible: %s)', (_what, raw, readable) => {
    expect(() => parseQuery(raw)).toThrow(expect.objectContaining({ headerReadable: readable }));
  });
});

describe('readPlainQuery', () => {
  const plain = (raw: Buffer) => {
    const into = new PlainQuestion();
    return readPlainQuery(raw, into) ? { ...into } : undefined;
  };
  /** `raw` with octet `at` set to `value`. */
  const patched = (raw: Buffer, at: number, value: number) => {
    const copy = Buffer.from(raw);
    copy[at] = value;
    return copy;
  };

  it('reads the question and the EDNS size and DO bit of a plain query, as parseQuery does', () => {
    for (const edns of [undefined, { udpSize: 1232 }, { udpSize: 4096, dnssecOk: true }, { udpSize: 100 }]) {
      const raw = query('Svc-1.Example.org', QTYPE.AAAA, edns);
      const q = parseQuery(raw);
      expect(plain(raw)).toEqual({
        questionEnd: q.questionEnd,
        qtype: QTYPE.AAAA,
        qclass: 1,
        ednsUdpSize: q.edns?.udpSize ?? 0,
        dnssecOk: q.edns?.dnssecOk ?? false,
      });
    }
    // The root, the shortest name there is.
    expect(plain(query('.', QTYPE.NS))).toMatchObject({ questionEnd: 17, qtype: QTYPE.NS });
  });

  it('leaves to the pipeline every message that is not a plain query, readable or not', () => {
    const a = query('a.example.org', QTYPE.A);
    const withOpt = query('a.example.org', QTYPE.A, { udpSize: 1232 });
    const opt = parseQuery(withOpt).questionEnd;
    const others: Array<[string, Buffer]> = [
      ['a short packet', Buffer.alloc(16)],
      ['a response', patched(a, 2, 0x81)],
      ['a NOTIFY', encodeMessage(buildQueryMessage(1, 'a.example.org', QTYPE.SOA, { opcode: 4 }))],
      ['two questions', patched(a, 5, 2)],
      ['no question', patched(a, 5, 0)],
      ['an answer record', patched(a, 7, 1)],
      ['an authority record', patched(a, 9, 1)],
      ['two additional records', patched(withOpt, 11, 2)],
      ['an additional record that is not an OPT', patched(withOpt, opt + 2, QTYPE.TSIG)],
      [
        'an OPT not owned by the root',
        Buffer.concat([withOpt.subarray(0, opt), Buffer.from([1, 0x61]), withOpt.subarray(opt + 1)]),
      ],
      ['EDNS version 1', patched(withOpt, opt + 6, 1)],
      ['an OPT whose RDATA runs past the end', patched(withOpt, opt + 10, 4)],
      ['a name running off the end', Buffer.from('12340100000100000000000003616263', 'hex')],
      ['a compression pointer', Buffer.from('123401000001000000000000c00c00010001', 'hex')],
      ['a question cut short', a.subarray(0, a.length - 1)],
      [
        'a name over 255 octets',
        Buffer.concat([
          a.subarray(0, 12),
          ...Array.from({ length: 5 }, () => Buffer.from([60, ...Buffer.alloc(60, 0x61)])),
          Buffer.from([0, 0, 1, 0, 1]),
        ]),
      ],
    ];
    for (const [what, raw] of others) expect(plain(raw), what).toBeUndefined();
    // Every one of them gets the pipeline's answer instead; the readable ones parse or throw there.
    expect(plain(a)).toBeDefined();
  });
});

describe('responses without a full encode', () => {
  it('finishes a template with the ID, RD, the asker case and an OPT', () => {
    const template = encodeMessage({
      id: 0,
      flags: { qr: true, opcode: 0, aa: true, tc: false, rd: false, ra: false, ad: false, cd: false, rcode: 0 },
      questions: [{ name: 'web.shop.svc.cluster.local.', type: QTYPE.A, class: 1 }],
      answers: [{ name: 'web.shop.svc.cluster.local.', type: QTYPE.A, class: 1, ttl: 30, address: '10.96.0.7' }],
      authorities: [],
      additionals: [],
    });
    const q = parseQuery(query('WEB.shop.svc.cluster.local', QTYPE.A, { udpSize: 4096 }));
    const reply = decodeMessage(finishFromTemplate(template, q, maxResponseBytes(q, 'udp')));
    expect(reply.id).toBe(0x1234);
    expect(reply.flags).toMatchObject({ qr: true, aa: true, rd: true, tc: false, rcode: 0 });
    expect(reply.questions[0]?.name).toBe('WEB.shop.svc.cluster.local.');
    expect(reply.answers.map((a) => a.address)).toEqual(['10.96.0.7']);
    expect(reply.additionals.map((a) => a.type)).toEqual([QTYPE.OPT]);
  });

  it('keeps every whole record that fits, with TC, when the reply is over the limit', () => {
    const answers = Array.from({ length: 60 }, (_, i) => ({
      name: 'big.example.org.',
      type: QTYPE.A,
      class: 1,
      ttl: 30,
      address: `10.0.0.${i}`,
    }));
    const template = encodeMessage({
      id: 0,
      flags: { qr: true, opcode: 0, aa: true, tc: false, rd: false, ra: false, ad: false, cd: false, rcode: 0 },
      questions: [{ name: 'big.example.org.', type: QTYPE.A, class: 1 }],
      answers,
      authorities: [],
      additionals: [],
    });
    const q = parseQuery(query('big.example.org', QTYPE.A));
    const udp = finishFromTemplate(template, q, maxResponseBytes(q, 'udp'));
    expect(udp.length).toBeLessThanOrEqual(512);
    const partial = decodeMessage(udp);
    expect(partial.flags.tc).toBe(true);
    // 12 + 21 (question) + 16 per compressed A record: 29 whole records fit in 512 octets.
    expect(partial.answers).toHaveLength(29);
    expect(partial.answers.map((a) => a.address)).toEqual(answers.slice(0, 29).map((a) => a.address));
    expect(decodeMessage(finishFromTemplate(template, q, maxResponseBytes(q, 'tcp'))).answers).toHaveLength(60);
  });

  it('puts BADVERS into the OPT extended rcode', () => {
    const raw = query('a.example.org', QTYPE.A, { udpSize: 1232 });
    // EDNS version 1: the OPT TTL's second octet.
    raw[raw.length - 5] = 1;
    const q = parseQuery(raw);
    expect(q.edns?.version).toBe(1);
    const reply = buildBareResponse(q, RCODE.BADVERS);
    expect(reply.readUInt16BE(2) & 0xf).toBe(0);
    expect(reply[reply.length - 6]).toBe(1);
  });

  it('answers FORMERR with the ID when only the header can be read', () => {
    const reply = buildHeaderOnlyResponse(Buffer.from('beef01000002000000000000', 'hex'), RCODE.FORMERR);
    expect(reply?.readUInt16BE(0)).toBe(0xbeef);
    expect((reply?.readUInt16BE(2) ?? 0) & 0x800f).toBe(0x8001);
    expect(buildHeaderOnlyResponse(Buffer.alloc(4), RCODE.FORMERR)).toBeUndefined();
  });
});

describe('the question name without a string per query', () => {
  const raw = (name: string) => encodeMessage(buildQueryMessage(1, name, QTYPE.A));
  it.each(['www.example.org', 'WwW.ExAmPlE.oRg', 'a\\032B\\000c.example.org', '.'])(
    'hashes %s as nameHashOf hashes its canonical octets, and makes qname and key on demand',
    (name) => {
      const q = parseQuery(raw(name));
      const lower = raw(name.replace(/[A-Z]/g, (c) => c.toLowerCase()));
      expect(q.nameHash).toBe(nameHashOf(raw(name), 12, q.questionEnd - 4));
      expect(q.nameHash).toBe(parseQuery(lower).nameHash);
      expect(sameNameOctets(raw(name), lower, 12, q.questionEnd - 4)).toBe(true);
      expect(q.qname).toBe(toFqdn(name) === '.' ? '.' : `${name}.`.replace(/\.\.$/, '.'));
      expect(q.key).toBe(toFqdn(name));
    },
  );

  it('tells names apart that differ in more than case', () => {
    const a = raw('a.example.org');
    const b = raw('b.example.org');
    expect(parseQuery(a).nameHash).not.toBe(parseQuery(b).nameHash);
    expect(sameNameOctets(a, b, 12, parseQuery(a).questionEnd - 4)).toBe(false);
    // Octets one bit apart that are not a letter in two cases: '@' and '`', '[' and '{', '^' and '~'.
    for (const [x, y] of [
      ['\\064', '\\096'],
      ['\\091', '\\123'],
      ['\\094', '\\126'],
    ]) {
      const p = raw(`a${x}.example.org`);
      const q = raw(`a${y}.example.org`);
      expect(sameNameOctets(p, q, 12, parseQuery(p).questionEnd - 4), `${x} vs ${y}`).toBe(false);
    }
  });
});

describe('questionInZone', () => {
  const zone = writeName('cluster.local.');
  it.each([
    ['cluster.local', true],
    ['KUBE.default.svc.Cluster.Local', true],
    ['a.b.c.d.e.f.cluster.local', true],
    ['xcluster.local', false],
    ['cluster.local.org', false],
    ['local', false],
    ['cluster.locaL.', true],
    ['example.org', false],
  ])('%s in cluster.local: %s', (name, inZone) => {
    expect(questionInZone(parseQuery(query(name, QTYPE.A)), zone)).toBe(inZone);
  });

  it('puts every name in the root zone, and compares the zone at label boundaries only', () => {
    expect(questionInZone(parseQuery(query('example.org', QTYPE.A)), writeName('.'))).toBe(true);
    // A zone's octets found inside a label ("acluster.local" ends in "cluster\\x05local\\x00" too) do not count.
    expect(questionInZone(parseQuery(query('acluster.local', QTYPE.A)), zone)).toBe(false);
    expect(questionInZone(parseQuery(query('in-addr.arpa', QTYPE.PTR)), writeName('in-addr.arpa.'))).toBe(true);
    expect(
      questionInZone(parseQuery(query('1.0.96.10.in-addr.arpa', QTYPE.PTR)), writeName('96.10.in-addr.arpa.')),
    ).toBe(true);
    expect(
      questionInZone(parseQuery(query('1.0.97.10.in-addr.arpa', QTYPE.PTR)), writeName('96.10.in-addr.arpa.')),
    ).toBe(false);
  });

  it('does not take a letter for a digit or other octet that differs only in the 0x20 bit', () => {
    // '@' (0x40) and '`' (0x60), '[' and '{': not letters, so not the same in another case.
    expect(questionInZone(parseQuery(query('a.x@y', QTYPE.A)), writeName('x`y.'))).toBe(false);
  });
});
