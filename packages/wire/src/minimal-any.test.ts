import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import { QTYPE } from './constants.js';
import { decodeMessage, encodeMessage } from './message.js';
import { minimalAnyReply } from './minimal-any.js';
import type { Rr } from './records.js';
import { scanResponse } from './response-scan.js';

const NAME = 'many.example.org.';
const reply = (answers: Rr[], extra: { authorities?: Rr[]; additionals?: Rr[] } = {}) =>
  encodeMessage({
    id: 7,
    flags: { qr: true, opcode: 0, aa: false, tc: false, rd: true, ra: true, ad: false, cd: false, rcode: 0 },
    questions: [{ name: NAME, type: QTYPE.ANY, class: 1 }],
    answers,
    authorities: extra.authorities ?? [],
    additionals: extra.additionals ?? [],
  });
const A = (address: string): Rr => ({ name: NAME, type: QTYPE.A, class: 1, ttl: 60, address });
const MX: Rr = { name: NAME, type: QTYPE.MX, class: 1, ttl: 60, priority: 10, target: 'mx.example.org.' };

/** An RRSIG over `covered` at the question's name, appended to the answer section by hand (no Rr shape for it). */
function withRrsig(msg: Buffer, covered: number): Buffer {
  const rdata = Buffer.alloc(20);
  rdata.writeUInt16BE(covered, 0);
  const record = Buffer.alloc(12);
  record.writeUInt16BE(0xc00c, 0);
  record.writeUInt16BE(QTYPE.RRSIG, 2);
  record.writeUInt16BE(1, 4);
  record.writeUInt32BE(60, 6);
  record.writeUInt16BE(rdata.length, 10);
  const out = Buffer.concat([msg, record, rdata]);
  out.writeUInt16BE(out.readUInt16BE(6) + 1, 6);
  return out;
}

describe('minimal ANY answers (RFC 8482)', () => {
  it('keeps the preferred RRset and the RRSIGs covering it, and drops the other sections', () => {
    const msg = withRrsig(withRrsig(reply([MX, A('192.0.2.1'), A('192.0.2.2')]), QTYPE.MX), QTYPE.A);
    const minimal = minimalAnyReply(msg, scanResponse(msg));
    const m = decodeMessage(minimal);
    expect(m.id).toBe(7);
    expect(m.flags).toMatchObject({ qr: true, rd: true, ra: true, rcode: 0 });
    expect(m.answers.map((r) => r.type)).toEqual([QTYPE.A, QTYPE.A, QTYPE.RRSIG]);
    const glued = reply([A('192.0.2.1')], { authorities: [MX], additionals: [A('192.0.2.9')] });
    const bare = decodeMessage(minimalAnyReply(glued, scanResponse(glued)));
    expect([bare.answers.length, bare.authorities, bare.additionals]).toEqual([1, [], []]);
  });

  it('returns the same reply when it holds one RRset and nothing else', () => {
    const msg = reply([A('192.0.2.1'), A('192.0.2.2')]);
    expect(minimalAnyReply(msg, scanResponse(msg))).toBe(msg);
    const empty = reply([]);
    expect(minimalAnyReply(empty, scanResponse(empty))).toBe(empty);
  });
});
