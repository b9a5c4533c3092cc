import { decodeMessage, encodeMessage, QTYPE, type Rr, scanResponse, toFqdn } from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import { scrubReply } from './scrub.js';

const reply = (answers: Rr[], authorities: Rr[] = [], additionals: Rr[] = []) =>
  encodeMessage({
    id: 0,
    flags: { qr: true, opcode: 0, aa: false, tc: false, rd: true, ra: true, ad: false, cd: false, rcode: 0 },
    questions: [{ name: 'www.example.org.', type: QTYPE.A, class: 1 }],
    answers,
    authorities,
    additionals,
  });
const A = (name: string, address: string): Rr => ({ name, type: QTYPE.A, class: 1, ttl: 60, address });
const CNAME = (name: string, target: string): Rr => ({ name, type: QTYPE.CNAME, class: 1, ttl: 60, target });
const NS = (name: string, target: string): Rr => ({ name, type: QTYPE.NS, class: 1, ttl: 60, target });
const scrub = (wire: Buffer) => decodeMessage(scrubReply(wire, scanResponse(wire), toFqdn('www.example.org')));

describe('scrubbing an upstream reply (what pertains to the question only)', () => {
  it('returns the reply itself when everything pertains to the question: no copy', () => {
    const wire = reply([CNAME('www.example.org.', 'cdn.example.net.'), A('cdn.example.net.', '192.0.2.1')]);
    expect(scrubReply(wire, scanResponse(wire), toFqdn('www.example.org'))).toBe(wire);
  });

  it('drops answers about other names, authority NS above nothing asked, and additionals nothing points at', () => {
    const m = scrub(
      reply(
        [A('www.example.org.', '192.0.2.1'), A('bank.example.com.', '203.0.113.66')],
        [NS('example.org.', 'ns1.example.org.'), NS('example.com.', 'ns.evil.example.')],
        [A('ns1.example.org.', '192.0.2.53'), A('ns.evil.example.', '203.0.113.67')],
      ),
    );
    expect(m.answers.map((a) => a.name)).toEqual(['www.example.org.']);
    expect(m.authorities.map((a) => a.name)).toEqual(['example.org.']);
    expect(m.additionals.map((a) => a.name)).toEqual(['ns1.example.org.']);
  });
});
