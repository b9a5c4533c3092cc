import { describe, expect, it } from 'vitest';
import { FLAG, OPCODE, QCLASS, QTYPE, RCODE } from './constants.js';
import type { QueryContext } from './listener.js';
import { buildQueryMessage, decodeMessage, encodeMessage } from './message.js';
import { createQueryPipeline, type QueryOutcome } from './pipeline.js';
import { buildBareResponse } from './response.js';

const context: QueryContext = { transport: 'udp', remoteAddress: '127.0.0.1', remotePort: 5353, family: 4 };
const query = (type: number = QTYPE.A, options: Parameters<typeof buildQueryMessage>[3] = {}) =>
  encodeMessage(buildQueryMessage(0x4242, 'a.example.org.', type, options));

function pipeline(extra: Partial<Parameters<typeof createQueryPipeline>[0]> = {}) {
  const outcomes: QueryOutcome[] = [];
  const warnings: string[] = [];
  const handled: number[] = [];
  const handle = createQueryPipeline({
    recursionAvailable: false,
    handle: (request) => {
      handled.push(request.limitBytes);
      return buildBareResponse(request.query, RCODE.NOERROR);
    },
    observe: (o) => outcomes.push(o),
    log: { warn: (_msg, fields) => warnings.push(String(fields?.reason)) },
    ...extra,
  });
  const rcodeOf = (raw: Buffer) => {
    const reply = handle(raw, context) as Buffer | undefined;
    return reply === undefined ? 'dropped' : decodeMessage(reply).flags.rcode;
  };
  return { handle, outcomes, warnings, handled, rcodeOf };
}

describe('the query pipeline', () => {
  it('drops messages shorter than a header and responses, answering neither', () => {
    const p = pipeline();
    expect(p.rcodeOf(Buffer.alloc(11))).toBe('dropped');
    const response = query();
    response.writeUInt16BE(response.readUInt16BE(2) | FLAG.QR, 2);
    expect(p.rcodeOf(response)).toBe('dropped');
    expect(p.outcomes.map((o) => o.rejected)).toEqual(['short', 'response']);
    expect(p.handled).toEqual([]);
  });

  it('answers NOTIMP to an unknown opcode even in a header-only message (RFC 8906)', () => {
    const p = pipeline();
    const headerOnly = Buffer.from('4242' + '7800' + '0000'.repeat(4), 'hex');
    const reply = p.handle(headerOnly, context) as Buffer;
    expect(decodeMessage(reply).flags).toMatchObject({ rcode: RCODE.NOTIMP, opcode: 15, qr: true });
    expect(reply.readUInt16BE(0)).toBe(0x4242);
    expect(p.rcodeOf(query(QTYPE.A, { opcode: OPCODE.NOTIFY }))).toBe(RCODE.NOTIMP);
  });

  it('hands opcodes it was told to take to the handler', () => {
    const p = pipeline({ opcodes: [OPCODE.QUERY, OPCODE.NOTIFY] });
    expect(p.rcodeOf(query(QTYPE.SOA, { opcode: OPCODE.NOTIFY }))).toBe(RCODE.NOERROR);
    expect(p.handled).toHaveLength(1);
  });

  it.each([
    ['two questions', Buffer.from('424201000002000000000000', 'hex')],
    ['a question running off the end', Buffer.from('4242010000010000000000000361', 'hex')],
  ])('answers FORMERR to %s, logging the reason once', (_what, raw) => {
    const p = pipeline();
    expect(p.rcodeOf(raw)).toBe(RCODE.FORMERR);
    expect(p.rcodeOf(raw)).toBe(RCODE.FORMERR);
    expect(p.warnings).toHaveLength(1);
    expect(p.outcomes.map((o) => o.rejected)).toEqual(['malformed', 'malformed']);
  });

  it.each([QTYPE.OPT, QTYPE.TSIG, QTYPE.TKEY])('answers FORMERR when type %i is asked', (type) => {
    expect(pipeline().rcodeOf(query(type))).toBe(RCODE.FORMERR);
  });

  it('answers BADVERS with an OPT of version 0 to EDNS version 1', () => {
    const raw = query(QTYPE.A, { edns: { udpSize: 1232 } });
    raw[raw.length - 5] = 1;
    const reply = pipeline().handle(raw, context) as Buffer;
    const opt = reply.subarray(reply.length - 11);
    expect(opt[5]).toBe(1); // extended rcode 1 << 4 | 0 = 16, BADVERS
    expect(opt[6]).toBe(0); // version 0
  });

  it('refuses classes the handler does not take, and takes those it does', () => {
    expect(pipeline().rcodeOf(query(QTYPE.TXT, { qclass: QCLASS.CH }))).toBe(RCODE.REFUSED);
    expect(pipeline({ classes: [QCLASS.CH] }).rcodeOf(query(QTYPE.TXT, { qclass: QCLASS.CH }))).toBe(RCODE.NOERROR);
  });

  it('answers SERVFAIL when the handler throws, sync or async, and observes it', async () => {
    const sync = pipeline({
      handle: () => {
        throw new Error('boom');
      },
    });
    expect(sync.rcodeOf(query())).toBe(RCODE.SERVFAIL);
    const async = pipeline({ handle: () => Promise.reject(new Error('later')) });
    const reply = (await async.handle(query(), context)) as Buffer;
    expect(decodeMessage(reply).flags.rcode).toBe(RCODE.SERVFAIL);
    expect(async.outcomes.map((o) => o.rejected)).toEqual(['handler-error']);
  });

  it('gives the handler the size limit: 512 without EDNS, ours at most with it, 64 KiB on TCP', () => {
    const p = pipeline({ udpPayloadBytes: 1232 });
    p.handle(query(), context);
    p.handle(query(QTYPE.A, { edns: { udpSize: 4096 } }), context);
    p.handle(query(QTYPE.A, { edns: { udpSize: 0 } }), context);
    p.handle(query(), { ...context, transport: 'tcp' });
    expect(p.handled).toEqual([512, 1232, 512, 65535]);
  });
});
