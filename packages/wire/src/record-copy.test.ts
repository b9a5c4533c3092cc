import { describe, expect, it } from 'vitest';
import { QTYPE } from './constants.js';
import { decodeMessage, encodeMessage } from './message.js';
import { copyWithoutOpt } from './record-copy.js';
import type { Rr } from './records.js';
import { scanResponse } from './response-scan.js';

const NAME = 'example.org.';
const OPT: Rr = { name: '.', type: QTYPE.OPT, class: 1232, ttl: 0 };
const NS: Rr = { name: NAME, type: QTYPE.NS, class: 1, ttl: 60, target: 'ns.example.org.' };
const GLUE: Rr = { name: 'ns.example.org.', type: QTYPE.A, class: 1, ttl: 60, address: '192.0.2.53' };
const reply = (additionals: Rr[]) =>
  encodeMessage({
    id: 1,
    flags: { qr: true, opcode: 0, aa: false, tc: false, rd: true, ra: true, ad: false, cd: false, rcode: 0 },
    questions: [{ name: NAME, type: QTYPE.NS, class: 1 }],
    answers: [NS],
    authorities: [],
    additionals,
  });

describe('copyWithoutOpt', () => {
  it.each([
    ['last', [GLUE, OPT]],
    ['first', [OPT, GLUE]],
  ])('keeps every additional record but the OPT, wherever the OPT stands (%s)', (_where, additionals) => {
    const msg = reply(additionals);
    const { wire, scanned } = copyWithoutOpt(msg, scanResponse(msg));
    const decoded = decodeMessage(wire);
    expect(decoded.additionals.map((r) => [r.name, r.type, 'address' in r ? r.address : ''])).toEqual([
      ['ns.example.org.', QTYPE.A, '192.0.2.53'],
    ]);
    expect(decoded.answers.map((r) => r.type)).toEqual([QTYPE.NS]);
    expect(scanned.opt).toBeUndefined();
    expect(scanned.records.map((r) => r.section)).toEqual(['answer', 'additional']);
    expect(scanResponse(wire).records.map((r) => r.start)).toEqual(scanned.records.map((r) => r.start));
  });
});
