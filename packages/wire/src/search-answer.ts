import type { Buffer } from 'node:buffer';
import { QTYPE, RCODE } from './constants.js';
import { decodeMessage, encodeMessage } from './message.js';
import type { DecodedRr } from './records.js';

/** A question as asked: its name in any case, its type and class. */
export interface AskedQuestion {
  readonly name: string;
  readonly qtype: number;
  readonly qclass: number;
}

/**
 * The answer to `asked` that a server-side search walk found under another name (CoreDNS's
 * autopath): `found`'s reply with the question put back as asked and, first in the answer, a CNAME
 * from the asked name to the name that exists. A stub resolver follows the CNAME and takes the
 * records after it, as from any CNAME answer; its search walk ends there. Given a reply in any
 * form (ID, OPT and all); returns a template for finishFromTemplate (ID 0, no OPT). The CNAME's TTL
 * is the shortest in the reply's answer (for NODATA, the SOA's), so the pair expires together.
 */
export function answerThroughSearch(asked: AskedQuestion, foundName: string, found: Buffer): Buffer {
  const reply = decodeMessage(found);
  const withoutOpt = (rrs: DecodedRr[]) => rrs.filter((rr) => rr.type !== QTYPE.OPT);
  const ttls = (reply.answers.length > 0 ? reply.answers : reply.authorities).map((rr) => rr.ttl);
  const ttl = ttls.length > 0 ? Math.min(...ttls) : 0;
  const cname: DecodedRr = { name: asked.name, type: QTYPE.CNAME, class: asked.qclass, ttl, target: foundName };
  return encodeMessage({
    id: 0,
    flags: { ...reply.flags, qr: true, aa: false, tc: false, rcode: RCODE.NOERROR },
    questions: [{ name: asked.name, type: asked.qtype, class: asked.qclass }],
    answers: [cname, ...reply.answers],
    authorities: reply.authorities,
    additionals: withoutOpt(reply.additionals),
  });
}
