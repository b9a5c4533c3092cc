import { Buffer } from 'node:buffer';
import dgram from 'node:dgram';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { RCODE } from './constants.js';
import type { Door } from './dns-handler.js';
import { type DnsListener, listenDns } from './listener.js';
import { buildQueryMessage, decodeMessage, encodeMessage } from './message.js';
import { PlainQuestion, readPlainQuery } from './query.js';
import { answerPlainRefusal } from './response.js';

const open: DnsListener[] = [];
const sockets: Array<dgram.Socket | net.Socket> = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s instanceof net.Socket ? s.destroy() : s.close();
  for (const l of open.splice(0)) await l.close({ deadlineMs: 100 });
});

const query = (id: number, name: string) => encodeMessage(buildQueryMessage(id, name, 1, { edns: { udpSize: 1232 } }));
/** Answers NOERROR with the question, counting what reaches it. */
const echo = (seen: string[]) => (message: Buffer) => {
  const q = new PlainQuestion();
  readPlainQuery(message, q);
  seen.push(decodeMessage(message).questions[0]?.name ?? '');
  return answerPlainRefusal(message, q, RCODE.NOERROR, { udpPayloadBytes: 1232 });
};
/** Refuses names starting with `refused`, drops `dropped…`, and lets the rest in; over UDP a reply for `big…` is cut to TC. */
const door: Door = {
  admit(message) {
    const name = decodeMessage(message).questions[0]?.name ?? '';
    const q = new PlainQuestion();
    readPlainQuery(message, q);
    if (name.startsWith('refused')) return answerPlainRefusal(message, q, RCODE.REFUSED, { udpPayloadBytes: 1232 });
    if (name.startsWith('dropped')) return null;
    return undefined;
  },
  release(reply) {
    const name = decodeMessage(reply).questions[0]?.name ?? '';
    if (!name.startsWith('big')) return reply;
    const cut = Buffer.from(reply);
    cut.writeUInt16BE(cut.readUInt16BE(2) | 0x0200, 2);
    return name.startsWith('bigdrop') ? null : cut;
  },
};

function udpAsk(port: number, message: Buffer): Promise<Buffer | undefined> {
  const s = dgram.createSocket('udp4');
  sockets.push(s);
  return new Promise((resolve) => {
    // A dropped query is told by the reply to the next one on the same socket, never by a timer.
    s.on('message', (reply) => resolve(reply.readUInt16BE(0) === message.readUInt16BE(0) ? reply : undefined));
    s.send(message, port, '127.0.0.1');
    s.send(query(0xffff, 'after.example.org'), port, '127.0.0.1');
  });
}

describe('listenDns with a door', () => {
  it('lets in, refuses or drops each UDP query before the express lane and the handler, and filters replies', async () => {
    const seen: string[] = [];
    let lane = 0;
    const l = await listenDns({
      host: '127.0.0.1',
      port: 0,
      handler: echo(seen),
      express: () => {
        lane++;
        return undefined;
      },
      door,
    });
    open.push(l);
    expect(decodeMessage((await udpAsk(l.port, query(1, 'ok.example.org'))) as Buffer).flags.rcode).toBe(RCODE.NOERROR);
    const refused = decodeMessage((await udpAsk(l.port, query(2, 'refused.example.org'))) as Buffer);
    expect([refused.id, refused.flags.rcode, refused.questions[0]?.name]).toEqual([
      2,
      RCODE.REFUSED,
      'refused.example.org.',
    ]);
    expect(await udpAsk(l.port, query(3, 'dropped.example.org'))).toBeUndefined();
    expect(decodeMessage((await udpAsk(l.port, query(4, 'big.example.org'))) as Buffer).flags.tc).toBe(true);
    expect(await udpAsk(l.port, query(5, 'bigdrop.example.org'))).toBeUndefined();
    // Only what the door let in reached the lane and the handler (each ask's follow-up too).
    expect(seen.filter((n) => n !== 'after.example.org.')).toEqual([
      'ok.example.org.',
      'big.example.org.',
      'bigdrop.example.org.',
    ]);
    expect(lane).toBe(seen.length);
  });

  it('asks the door for each TCP query: a refusal is written as its reply, a drop leaves it unanswered', async () => {
    const seen: string[] = [];
    const l = await listenDns({ host: '127.0.0.1', port: 0, handler: echo(seen), door });
    open.push(l);
    const s = net.connect(l.port, '127.0.0.1');
    sockets.push(s);
    const frames = [query(1, 'refused.example.org'), query(2, 'dropped.example.org'), query(3, 'big.example.org')].map(
      (m) => Buffer.concat([Buffer.from([m.length >> 8, m.length & 0xff]), m]),
    );
    s.write(Buffer.concat(frames));
    const replies: Buffer[] = [];
    let buffered = Buffer.alloc(0);
    await new Promise<void>((resolve) =>
      s.on('data', (chunk) => {
        buffered = Buffer.concat([buffered, chunk]);
        while (buffered.length >= 2 && buffered.length >= 2 + buffered.readUInt16BE(0)) {
          replies.push(buffered.subarray(2, 2 + buffered.readUInt16BE(0)));
          buffered = buffered.subarray(2 + buffered.readUInt16BE(0));
        }
        if (replies.length === 2) resolve();
      }),
    );
    // No TC over TCP: release() is for UDP replies only.
    expect(replies.map((r) => [r.readUInt16BE(0), decodeMessage(r).flags.rcode, decodeMessage(r).flags.tc])).toEqual([
      [1, RCODE.REFUSED, false],
      [3, RCODE.NOERROR, false],
    ]);
    expect(seen).toEqual(['big.example.org.']);
  });
});
