import dgram from 'node:dgram';
import { afterEach, describe, expect, it } from 'vitest';
import { RCODE } from './constants.js';
import { toFqdn } from './fqdn.js';
import { buildBareResponse, parseQuery } from './index.js';
import { createUdpFanout } from './udp-fanout.js';
import { buildNotify } from './zone-change.js';

const sockets: dgram.Socket[] = [];
afterEach(() => {
  for (const s of sockets.splice(0)) s.close();
});

async function receiver(answer: (msg: Buffer, reply: (b: Buffer) => void) => void) {
  const socket = dgram.createSocket('udp4');
  sockets.push(socket);
  await new Promise<void>((r) => socket.bind(0, '127.0.0.1', r));
  socket.on('message', (msg, rinfo) => answer(msg, (b) => socket.send(b, rinfo.port, rinfo.address)));
  return { host: '127.0.0.1', port: socket.address().port };
}

describe('UDP fan-out: NOTIFYs to many servers over a few sockets', () => {
  it('matches each answer to its server and message, and times out the one never answered', async () => {
    const zone = toFqdn('cluster.local');
    const ack = (msg: Buffer) => buildBareResponse(parseQuery(msg), RCODE.NOERROR, { authoritative: true });
    const servers = await Promise.all(Array.from({ length: 50 }, () => receiver((m, reply) => reply(ack(m)))));
    const silent = await receiver(() => {});
    const fanout = createUdpFanout();
    const replies = await Promise.all(servers.map((s, i) => fanout.exchange(s, buildNotify(i, zone), 2000)));
    expect(replies.map((r) => r.readUInt16BE(0))).toEqual(servers.map((_, i) => i));
    await expect(fanout.exchange(silent, buildNotify(7, zone), 100)).rejects.toThrow(/no reply/);
    expect(fanout.pending).toBe(0);
    fanout.close();
  });

  it('takes no answer to another question than the one asked', async () => {
    const zone = toFqdn('cluster.local');
    // Answers with the right ID, but to another name.
    const wrong = await receiver((m, reply) => {
      const answer = buildBareResponse(parseQuery(m), RCODE.NOERROR, { authoritative: true });
      answer[13] = 0x78; // cluster.local. → xluster.local.
      reply(answer);
    });
    const fanout = createUdpFanout();
    await expect(fanout.exchange(wrong, buildNotify(43, zone), 200)).rejects.toThrow(/no reply/);
    fanout.close();
  });
});
