/**
 * Hand-made DNS messages that servers get wrong: the corpus the fuzz suites send to every
 * listener, each with what RFC 1035/6891/8906 expect back. Built octet by octet on purpose: no
 * encoder of ours would write most of these.
 */

/** What a server must do with a message. */
export type Expectation =
  | { readonly kind: 'drop' }
  | { readonly kind: 'rcode'; readonly rcodes: readonly number[]; readonly opt?: 'none' | 'version0' }
  /** Answered, any rcode, as long as the reply is well-formed (names the corpus leaves open). */
  | { readonly kind: 'answered'; readonly maxBytes?: number; readonly opt?: 'none' | 'version0' };

export interface CraftedPacket {
  readonly name: string;
  readonly bytes: Buffer;
  readonly expect: Expectation;
  /** Only over UDP (a zone transfer over TCP is a real one, for allowed clients). */
  readonly udpOnly?: boolean;
}

const NOERROR = 0;
const FORMERR = 1;
const NXDOMAIN = 3;
const NOTIMP = 4;
const REFUSED = 5;
const BADVERS = 16;

export function header(
  o: { id?: number; flags?: number; qd?: number; an?: number; ns?: number; ar?: number } = {},
): Buffer {
  const b = Buffer.alloc(12);
  b.writeUInt16BE(o.id ?? 0x4242, 0);
  b.writeUInt16BE(o.flags ?? 0x0100, 2);
  b.writeUInt16BE(o.qd ?? 1, 4);
  b.writeUInt16BE(o.an ?? 0, 6);
  b.writeUInt16BE(o.ns ?? 0, 8);
  b.writeUInt16BE(o.ar ?? 0, 10);
  return b;
}

/** Length-prefixed labels (raw octets allowed) and the terminating zero. */
export function nameBytes(labels: ReadonlyArray<string | Buffer>): Buffer {
  const parts: Buffer[] = [];
  for (const label of labels) {
    const octets = typeof label === 'string' ? Buffer.from(label, 'latin1') : label;
    parts.push(Buffer.from([octets.length]), octets);
  }
  parts.push(Buffer.from([0]));
  return Buffer.concat(parts);
}

const u16 = (n: number) => {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(n, 0);
  return b;
};

export function question(name: Buffer, qtype = 1, qclass = 1): Buffer {
  return Buffer.concat([name, u16(qtype), u16(qclass)]);
}

/** An OPT record (RFC 6891): owner, payload size, extended rcode/version/DO, options. */
export function optRecord(
  o: { owner?: Buffer; udp?: number; version?: number; options?: Array<[number, Buffer]> } = {},
): Buffer {
  const options = Buffer.concat((o.options ?? []).flatMap(([code, data]) => [u16(code), u16(data.length), data]));
  const ttl = Buffer.alloc(4);
  ttl.writeUInt8(o.version ?? 0, 1);
  return Buffer.concat([o.owner ?? Buffer.from([0]), u16(41), u16(o.udp ?? 1232), ttl, u16(options.length), options]);
}

/** A query for `labels` (A by default) as a stub resolver sends it. */
export function query(labels: readonly string[], qtype = 1, extra: { flags?: number; opt?: Buffer } = {}): Buffer {
  return Buffer.concat([
    header({ flags: extra.flags, ar: extra.opt ? 1 : 0 }),
    question(nameBytes(labels), qtype),
    ...(extra.opt ? [extra.opt] : []),
  ]);
}

/**
 * The corpus, for a server that answers (or forwards) `good`, a name that exists. `transport`
 * changes what zone transfers get.
 */
export function craftedPackets(good: readonly string[]): CraftedPacket[] {
  const g = nameBytes(good);
  const q = question(g);
  const out: CraftedPacket[] = [];
  const add = (name: string, bytes: Buffer, expect: Expectation) =>
    out.push({ name, bytes, expect, udpOnly: name.includes('over UDP') });
  const drop: Expectation = { kind: 'drop' };
  const formerr: Expectation = { kind: 'rcode', rcodes: [FORMERR] };

  // Datagram shapes.
  for (let n = 0; n < 12; n++) add(`${n}-octet datagram`, Buffer.alloc(n, 0x41), drop);
  add(
    'QR=1 (a response): never answered, so two servers never bounce',
    Buffer.concat([header({ flags: 0x8180 }), q]),
    drop,
  );
  add('QDCOUNT 0', header({ qd: 0 }), { kind: 'rcode', rcodes: [FORMERR] });
  add('QDCOUNT 2', Buffer.concat([header({ qd: 2 }), q, q]), formerr);
  add('QDCOUNT 65535, one question present', Buffer.concat([header({ qd: 65535 }), q]), formerr);
  add('ARCOUNT 65535 with no records', Buffer.concat([header({ ar: 65535 }), q]), formerr);
  add('ANCOUNT 3 with no records', Buffer.concat([header({ an: 3 }), q]), formerr);
  add('trailing garbage after the question', Buffer.concat([header(), q, Buffer.alloc(40, 0xee)]), {
    kind: 'answered',
  });
  add('question cut in the middle of the name', Buffer.concat([header(), g.subarray(0, 5)]), formerr);
  add('question without its type and class', Buffer.concat([header(), g]), formerr);

  // Names.
  add('64-octet label', Buffer.concat([header(), question(nameBytes(['a'.repeat(64), 'example']))]), formerr);
  add('label type 0x40 (extended)', Buffer.concat([header(), Buffer.from([0x41, 0x61, 0]), u16(1), u16(1)]), formerr);
  add('label type 0x80 (reserved)', Buffer.concat([header(), Buffer.from([0x81, 0x61, 0]), u16(1), u16(1)]), formerr);
  const labels255 = ['a'.repeat(63), 'b'.repeat(63), 'c'.repeat(63), 'd'.repeat(61)]; // 4*1+250+1 = 255
  add('name of exactly 255 octets', Buffer.concat([header(), question(nameBytes(labels255))]), { kind: 'answered' });
  add(
    'name of 256 octets',
    Buffer.concat([header(), question(nameBytes(['a'.repeat(63), 'b'.repeat(63), 'c'.repeat(63), 'd'.repeat(62)]))]),
    formerr,
  );
  add('name without its terminating zero', Buffer.concat([header(), Buffer.from([3, 0x61, 0x62, 0x63])]), formerr);
  add('compression pointer to itself', Buffer.concat([header(), Buffer.from([0xc0, 12]), u16(1), u16(1)]), formerr);
  add(
    'two pointers pointing at each other',
    Buffer.concat([header(), Buffer.from([0xc0, 14, 0xc0, 12]), u16(1), u16(1)]),
    formerr,
  );
  // A forward pointer, or one into the header, reads as some name: answered or FORMERR, never a crash.
  add(
    'forward pointer',
    Buffer.concat([header(), Buffer.from([0xc0, 18]), u16(1), u16(1), Buffer.from([1, 0x61, 0])]),
    {
      kind: 'answered',
    },
  );
  add('pointer past the end', Buffer.concat([header(), Buffer.from([0xc0, 0xff]), u16(1), u16(1)]), formerr);
  add('pointer into the header', Buffer.concat([header(), Buffer.from([0xc0, 2]), u16(1), u16(1)]), {
    kind: 'answered',
  });
  /** A question whose name is a pointer to `tail`, laid out after the question's type and class. */
  const pointedAt = (build: (start: number) => { bytes: Buffer; entry: number }) => {
    const start = 12 + 2 + 4;
    const { bytes, entry } = build(start);
    return Buffer.concat([header(), Buffer.from([0xc0 | (entry >> 8), entry & 0xff]), u16(1), u16(1), bytes]);
  };
  add(
    '200-hop pointer chain',
    pointedAt((start) => {
      const parts: Buffer[] = [Buffer.from([1, 0x61, 0])];
      let target = start;
      let at = start + 3;
      for (let i = 0; i < 200; i++) {
        parts.push(Buffer.from([1, 0x62, 0xc0 | (target >> 8), target & 0xff]));
        target = at;
        at += 4;
      }
      return { bytes: Buffer.concat(parts), entry: target };
    }),
    formerr,
  );
  add(
    'pointers that expand past 255 octets',
    pointedAt((start) => {
      const parts: Buffer[] = [Buffer.from([0])];
      let target = start;
      let at = start + 1;
      for (let i = 0; i < 6; i++) {
        const hop = Buffer.concat([
          Buffer.from([63]),
          Buffer.alloc(63, 0x61),
          Buffer.from([0xc0 | (target >> 8), target & 0xff]),
        ]);
        parts.push(hop);
        target = at;
        at += hop.length;
      }
      return { bytes: Buffer.concat(parts), entry: target };
    }),
    formerr,
  );
  for (const [what, octet] of [
    ['NUL', 0x00],
    ['dot', 0x2e],
    ['space', 0x20],
    ['0x80', 0x80],
    ['0xff', 0xff],
  ] as const) {
    add(
      `a ${what} octet inside a label`,
      Buffer.concat([header(), question(nameBytes([Buffer.from([0x61, octet, 0x62]), ...good.slice(1)]))]),
      { kind: 'answered' },
    );
  }

  // Opcodes and types.
  for (const opcode of [1, 2, 3, 5, 6, 15])
    add(`opcode ${opcode}`, Buffer.concat([header({ flags: 0x0100 | (opcode << 11) }), q]), {
      kind: 'rcode',
      rcodes: [NOTIMP],
    });
  add('opcode 5 (UPDATE), header only', header({ flags: 5 << 11, qd: 0 }), { kind: 'rcode', rcodes: [NOTIMP] });
  for (const qtype of [65280, 999, 0])
    add(`unknown QTYPE ${qtype}`, Buffer.concat([header(), question(g, qtype)]), {
      kind: 'rcode',
      rcodes: [NOERROR, NXDOMAIN, REFUSED],
    });
  for (const [what, qtype] of [
    ['OPT', 41],
    ['TSIG', 250],
    ['TKEY', 249],
  ] as const)
    add(`QTYPE ${what} as the question`, Buffer.concat([header(), question(g, qtype)]), formerr);
  add('ANY', Buffer.concat([header(), question(g, 255)]), { kind: 'answered' });
  add('AXFR over UDP', Buffer.concat([header(), question(g, 252)]), {
    kind: 'rcode',
    rcodes: [FORMERR, REFUSED, NOTIMP],
  });
  add('IXFR over UDP without a SOA', Buffer.concat([header(), question(g, 251)]), {
    kind: 'rcode',
    rcodes: [FORMERR, REFUSED, NOTIMP],
  });

  // EDNS.
  add('two OPT records', Buffer.concat([header({ ar: 2 }), q, optRecord(), optRecord()]), formerr);
  add(
    'OPT with a non-root owner',
    Buffer.concat([header({ ar: 1 }), q, optRecord({ owner: nameBytes(['x']) })]),
    formerr,
  );
  add('OPT in the answer section', Buffer.concat([header({ an: 1 }), q, optRecord()]), formerr);
  add('EDNS version 1', Buffer.concat([header({ ar: 1 }), q, optRecord({ version: 1 })]), {
    kind: 'rcode',
    rcodes: [BADVERS],
    opt: 'version0',
  });
  for (const udp of [0, 511])
    add(`EDNS payload ${udp} (taken as 512)`, Buffer.concat([header({ ar: 1 }), q, optRecord({ udp })]), {
      kind: 'answered',
      maxBytes: 512,
      opt: 'version0',
    });
  add(
    'unknown EDNS options (ignored, not echoed)',
    Buffer.concat([
      header({ ar: 1 }),
      q,
      optRecord({
        options: [
          [65001, Buffer.from('hello')],
          [65002, Buffer.alloc(0)],
        ],
      }),
    ]),
    { kind: 'answered', opt: 'version0' },
  );
  add('no OPT: no OPT back, at most 512 octets', Buffer.concat([header(), question(g, 255)]), {
    kind: 'answered',
    maxBytes: 512,
    opt: 'none',
  });
  return out;
}

/** Checks a reply against an expectation; a reason when it does not match. */
export function checkExpectation(sent: Buffer, reply: Buffer | undefined, expect: Expectation): string | undefined {
  if (expect.kind === 'drop') return reply === undefined ? undefined : 'answered a message that must be dropped';
  if (!reply) return 'no reply';
  if (reply.length < 12) return `reply of ${reply.length} octets`;
  if (sent.length >= 2 && reply.readUInt16BE(0) !== sent.readUInt16BE(0)) return 'reply ID differs';
  if ((reply.readUInt16BE(2) & 0x8000) === 0) return 'reply without QR';
  const opt = findOpt(reply);
  const rcode = (reply.readUInt16BE(2) & 0x0f) | ((opt?.extendedRcode ?? 0) << 4);
  if (expect.kind === 'rcode' && !expect.rcodes.includes(rcode))
    return `rcode ${rcode}, expected ${expect.rcodes.join('/')}`;
  if (expect.kind === 'answered' && expect.maxBytes !== undefined && reply.length > expect.maxBytes)
    return `${reply.length} octets, more than ${expect.maxBytes}`;
  if (expect.opt === 'none' && opt) return 'an OPT in reply to a query without one';
  if (expect.opt === 'version0') {
    if (!opt) return 'no OPT in reply to an EDNS query';
    if (opt.version !== 0) return `OPT version ${opt.version}`;
    if (opt.optionCodes.some((c) => c >= 65000)) return 'echoed an unknown EDNS option';
  }
  return undefined;
}

/** The OPT of a reply, read without our decoder (the corpus checks it, so it must not rely on it). */
function findOpt(msg: Buffer): { extendedRcode: number; version: number; optionCodes: number[] } | undefined {
  let pos = 12;
  const skipName = () => {
    for (;;) {
      const len = msg[pos] as number;
      if (len === undefined) throw new Error('short');
      if ((len & 0xc0) === 0xc0) {
        pos += 2;
        return;
      }
      pos += 1 + len;
      if (len === 0) return;
    }
  };
  try {
    const counts = [msg.readUInt16BE(4), msg.readUInt16BE(6), msg.readUInt16BE(8), msg.readUInt16BE(10)];
    for (let i = 0; i < (counts[0] as number); i++) {
      skipName();
      pos += 4;
    }
    const records = (counts[1] as number) + (counts[2] as number) + (counts[3] as number);
    for (let i = 0; i < records; i++) {
      skipName();
      const type = msg.readUInt16BE(pos);
      const ttl = msg.readUInt32BE(pos + 4);
      const rdlength = msg.readUInt16BE(pos + 8);
      const rdata = msg.subarray(pos + 10, pos + 10 + rdlength);
      pos += 10 + rdlength;
      if (type === 41) {
        const optionCodes: number[] = [];
        for (let o = 0; o + 4 <= rdata.length; o += 4 + rdata.readUInt16BE(o + 2))
          optionCodes.push(rdata.readUInt16BE(o));
        return { extendedRcode: ttl >>> 24, version: (ttl >>> 16) & 0xff, optionCodes };
      }
    }
  } catch {
    return undefined;
  }
  return undefined;
}

/**
 * One random mutation of a message (seeded by `random`): bit flips, an octet changed, cut,
 * grown, a header field set at random, or octets spliced in. What mutation fuzzers do to valid
 * packets; the server must answer or drop every one, and keep answering good ones.
 */
export function mutate(message: Buffer, random: () => number): Buffer {
  const out = Buffer.from(message);
  const at = () => Math.floor(random() * out.length);
  switch (Math.floor(random() * 7)) {
    case 0:
      for (let i = 0, n = 1 + Math.floor(random() * 4); i < n && out.length; i++) {
        const p = at();
        out[p] = (out[p] as number) ^ (1 << Math.floor(random() * 8));
      }
      return out;
    case 1:
      if (out.length) out[at()] = Math.floor(random() * 256);
      return out;
    case 2:
      return out.subarray(0, Math.floor(random() * out.length));
    case 3:
      return Buffer.concat([
        out,
        Buffer.from(Array.from({ length: 1 + Math.floor(random() * 64) }, () => Math.floor(random() * 256))),
      ]);
    case 4: {
      if (out.length >= 12) out.writeUInt16BE(Math.floor(random() * 65536), 2 + 2 * Math.floor(random() * 5));
      return out;
    }
    case 5: {
      const p = at();
      const bytes = Buffer.from(
        Array.from(
          { length: 1 + Math.floor(random() * 8) },
          () => [0xc0, 0x3f, 0x40, 0, 0xff][Math.floor(random() * 5)] as number,
        ),
      );
      return Buffer.concat([out.subarray(0, p), bytes, out.subarray(p)]);
    }
    default:
      return Buffer.from(Array.from({ length: Math.floor(random() * 80) }, () => Math.floor(random() * 256)));
  }
}

/** A small seeded PRNG (mulberry32): the same seed gives the same mutations, for reproducing a finding. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
