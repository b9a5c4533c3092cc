import { describe, expect, it } from 'vitest';
import { QTYPE, RCODE } from './constants.js';
import { buildQueryMessage, encodeMessage } from './message.js';
import { parseQuery } from './query.js';
import { checkReply, compareQuestion, questionEndOf } from './reply-check.js';
import { buildBareResponse } from './response.js';

const query = (name: string, type: number = QTYPE.A) => encodeMessage(buildQueryMessage(7, name, type));
const reply = (q: Buffer, rcode: number = RCODE.NOERROR) => buildBareResponse(parseQuery(q), rcode);

describe('reply checks (RFC 5452 §9.1)', () => {
  const q = query('WwW.Example.ORG');
  const end = questionEndOf(q);

  it('finds where our question ends', () => {
    expect(end).toBe(12 + 17 + 4);
    expect(questionEndOf(Buffer.alloc(12))).toBe(-1);
  });

  it.each([
    ['the same octets', 'WwW.Example.ORG', QTYPE.A, 'same'],
    ['another case', 'www.example.org', QTYPE.A, 'case'],
    ['another name', 'www.example.net', QTYPE.A, 'other'],
    ['another type', 'WwW.Example.ORG', QTYPE.AAAA, 'other'],
  ] as const)('compares a question with %s as %s', (_what, name, type, expected) => {
    expect(compareQuestion(reply(query(name, type)), q, end)).toBe(expected);
  });

  it('takes a reply in any case, and tells why it refuses one', () => {
    expect(checkReply(reply(query('www.EXAMPLE.org')), q, end)).toBeUndefined();
    const wrongId = reply(q);
    wrongId.writeUInt16BE(8, 0);
    expect(checkReply(wrongId, q, end)).toBe('id');
    expect(checkReply(q, q, end)).toBe('not-a-response');
    expect(checkReply(reply(query('other.example.org')), q, end)).toBe('question');
  });

  it('takes a failure without a question on its ID, but never an answer without one', () => {
    const bare = (rcode: number) => {
      const r = reply(q, rcode).subarray(0, 12);
      r.writeUInt16BE(0, 4);
      return r;
    };
    expect(checkReply(bare(RCODE.SERVFAIL), q, end)).toBeUndefined();
    expect(checkReply(bare(RCODE.NOERROR), q, end)).toBe('question');
    expect(checkReply(bare(RCODE.NXDOMAIN), q, end)).toBe('question');
  });
});
