import { craftedPackets, mutate, optRecord, query, seededRandom } from '@cluster-dns/testkit';
import {
  ClusterDnsError,
  createQueryPipeline,
  decodeMessage,
  encodeMessage,
  FLAG,
  parseQuery,
  QTYPE,
  scanResponse,
  ZoneChangeReader,
} from '@cluster-dns/wire';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SCALE } from '../support/stack.js';

// The decoders every process shares, on arbitrary octets and on mutations of real messages:
// they may refuse a message only with one of our errors (which the listeners turn into FORMERR
// or a drop), and what they accept must encode back to the same message.
const RUNS = 2000 * SCALE;
const GOOD = ['kubernetes', 'default', 'svc', 'cluster', 'local'];

const realMessages = () => [
  query(GOOD),
  query(['_https', '_tcp', ...GOOD], QTYPE.SRV, { opt: optRecord({ udp: 4096 }) }),
  query(['1', '0', '96', '10', 'in-addr', 'arpa'], QTYPE.PTR),
  ...craftedPackets(GOOD).map((p) => p.bytes),
  encodeMessage({
    id: 7,
    flags: { qr: true, opcode: 0, aa: true, tc: false, rd: true, ra: false, ad: false, cd: false, rcode: 0 },
    questions: [{ name: 'pg.data.svc.cluster.local.', type: QTYPE.SRV, class: 1 }],
    answers: Array.from({ length: 5 }, (_, i) => ({
      name: 'pg.data.svc.cluster.local.',
      type: QTYPE.SRV,
      class: 1,
      ttl: 30,
      priority: 10,
      weight: 20,
      port: 5432,
      target: `pg-${i}.pg.data.svc.cluster.local.`,
    })),
    authorities: [],
    additionals: Array.from({ length: 5 }, (_, i) => ({
      name: `pg-${i}.pg.data.svc.cluster.local.`,
      type: QTYPE.A,
      class: 1,
      ttl: 30,
      address: `10.244.1.${i}`,
    })),
  }),
];

/** Octets: arbitrary ones, or a real message mutated a few times. */
const octets = () => {
  const real = realMessages();
  // Mutants weigh three to one: random octets rarely get past the header, mutants reach the
  // record and name readers.
  return fc.oneof(
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 600 }).map((a) => Buffer.from(a)) },
    {
      weight: 3,
      arbitrary: fc
        .tuple(fc.nat(real.length - 1), fc.integer(), fc.integer({ min: 1, max: 4 }))
        .map(([i, seed, times]) => {
          const random = seededRandom(seed);
          let m = real[i] as Buffer;
          for (let k = 0; k < times; k++) m = mutate(m, random);
          return m;
        }),
    },
  );
};

/** The message with every name lowercased (ASCII only, as RFC 4343 folds). */
const folded = (m: ReturnType<typeof decodeMessage>) =>
  JSON.parse(
    JSON.stringify(m, (key, value) =>
      (key === 'name' || key === 'target' || key === 'primary' || key === 'admin') && typeof value === 'string'
        ? value.replace(/[A-Z]/g, (c) => c.toLowerCase())
        : value,
    ),
  );

const onlyOurErrors = (fn: () => unknown) => {
  try {
    fn();
  } catch (error) {
    if (!(error instanceof ClusterDnsError)) throw error;
  }
};

describe('decoders on hostile octets', () => {
  it('parseQuery, decodeMessage and scanResponse refuse only with our errors', () => {
    fc.assert(
      fc.property(octets(), (bytes) => {
        onlyOurErrors(() => parseQuery(bytes));
        onlyOurErrors(() => decodeMessage(bytes));
        onlyOurErrors(() => scanResponse(bytes));
        onlyOurErrors(() => new ZoneChangeReader().push(bytes));
      }),
      { numRuns: RUNS },
    );
  });

  it('what decodeMessage accepts encodes and decodes back to the same message', () => {
    let accepted = 0;
    fc.assert(
      fc.property(octets(), (bytes) => {
        let decoded: ReturnType<typeof decodeMessage>;
        try {
          decoded = decodeMessage(bytes);
        } catch {
          return;
        }
        let encoded: Buffer;
        try {
          encoded = encodeMessage(decoded as Parameters<typeof encodeMessage>[0]);
        } catch (error) {
          // A name that reads but cannot be written (over 255 octets spelt out) is ours to refuse.
          if (error instanceof ClusterDnsError) return;
          throw error;
        }
        accepted++;
        // Names compare without case: compression points a later name at an earlier one that
        // differs only in case (as miekg/dns and dns2 do), and DNS names are case-insensitive.
        expect(folded(decodeMessage(encoded))).toEqual(folded(decoded));
      }),
      { numRuns: RUNS },
    );
    expect(accepted).toBeGreaterThan(RUNS / 20);
  });

  it('the query pipeline answers or drops anything, never throws, and never answers a response', () => {
    const pipeline = createQueryPipeline({
      handle: () => undefined,
      recursionAvailable: false,
    });
    fc.assert(
      fc.property(octets(), (bytes) => {
        const reply = pipeline(bytes, { transport: 'udp', remoteAddress: '127.0.0.1', remotePort: 1, family: 4 });
        if (reply instanceof Promise) throw new Error('the pipeline of a synchronous handler went asynchronous');
        if (reply === undefined) return;
        const first = Buffer.isBuffer(reply) ? reply : [...reply][0];
        if (!first) return;
        if (bytes.length >= 4) expect(bytes.readUInt16BE(2) & FLAG.QR).toBe(0);
        expect(first.readUInt16BE(0)).toBe(bytes.readUInt16BE(0));
        expect(first.readUInt16BE(2) & FLAG.QR).toBe(FLAG.QR);
        decodeMessage(first);
      }),
      { numRuns: RUNS },
    );
  });
});
