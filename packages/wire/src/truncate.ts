import { Buffer } from 'node:buffer';
import { FLAG, HEADER_BYTES } from './constants.js';
import { skipName } from './names-on-wire.js';

/**
 * A reply cut to `limitBytes` at a record boundary, as dnsmasq and CoreDNS cut them: every whole
 * record that fits, in order (answer, authority, additional), so a client that never retries over
 * TCP (musl before 1.2.4, busybox) still gets usable addresses. Compression pointers only point
 * backwards, so a prefix of the records stays valid. TC is set when an answer or authority record
 * had to go; dropping only additional records does not set it (RFC 2181 §9). The input has no OPT
 * record (the caller appends its own after this) and is never changed.
 */
export function truncateReply(reply: Buffer, limitBytes: number): Buffer {
  if (reply.length <= limitBytes) return reply;
  const counts = [reply.readUInt16BE(6), reply.readUInt16BE(8), reply.readUInt16BE(10)];
  let pos = HEADER_BYTES;
  for (let i = reply.readUInt16BE(4); i > 0; i--) pos = skipName(reply, pos) + 4;
  let cut = pos;
  const kept = [0, 0, 0];
  let section = 0;
  fill: for (; section < 3; section++) {
    for (let i = 0; i < (counts[section] as number); i++) {
      const rdataAt = skipName(reply, pos) + 10;
      if (rdataAt > reply.length) break fill;
      pos = rdataAt + reply.readUInt16BE(rdataAt - 2);
      if (pos > limitBytes || pos > reply.length) break fill;
      kept[section] = (kept[section] as number) + 1;
      cut = pos;
    }
  }
  const out = Buffer.from(reply.subarray(0, cut));
  out.writeUInt16BE(kept[0] as number, 6);
  out.writeUInt16BE(kept[1] as number, 8);
  out.writeUInt16BE(kept[2] as number, 10);
  const lostRequired = kept[0] !== counts[0] || kept[1] !== counts[1];
  if (lostRequired) out.writeUInt16BE(out.readUInt16BE(2) | FLAG.TC, 2);
  return out;
}

/**
 * A reply cut to its header and question with TC set: the few octets that tell a client to ask
 * again over TCP, where its address is proven (response rate limiting's "slip"). The rcode and
 * flags stay; no records, no OPT. `questionEnd` is where the reply's question ends.
 */
export function truncateToQuestion(reply: Buffer, questionEnd: number): Buffer {
  const out = Buffer.from(reply.subarray(0, questionEnd));
  out.writeUInt16BE(out.readUInt16BE(2) | FLAG.TC, 2);
  out.writeUInt16BE(0, 6);
  out.writeUInt16BE(0, 8);
  out.writeUInt16BE(0, 10);
  return out;
}
