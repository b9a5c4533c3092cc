import dgram from 'node:dgram';
import { describe, expect, it } from 'vitest';
import { procNetAddress, QUEUED_DATAGRAM_BYTES, udpQueueReader } from './udp-queue.js';

describe('the kernel’s UDP receive queue, from /proc/net/udp', () => {
  it.each([
    ['127.0.0.1', 53, 4, '0100007F:0035'],
    ['0.0.0.0', 5353, 4, '00000000:14E9'],
    ['::1', 53, 6, '00000000000000000000000001000000:0035'],
    ['fd00::10', 53, 6, '000000FD000000000000000010000000:0035'],
  ] as const)('spells %s port %i as the kernel does', (host, port, family, spelt) => {
    expect(procNetAddress(host, port, family)).toBe(spelt);
  });

  it('finds the socket bound to the address, and tells a port nobody holds', async () => {
    const socket = dgram.createSocket('udp4');
    await new Promise<void>((r) => socket.bind(0, '127.0.0.1', () => r()));
    const port = socket.address().port;
    expect(udpQueueReader('127.0.0.1', port, 4)?.()).toBe(0);
    socket.close();
    await new Promise((r) => setImmediate(r));
    expect(udpQueueReader('127.0.0.1', port, 4)?.()).toBe(-1);
    expect(QUEUED_DATAGRAM_BYTES).toBeGreaterThan(500);
  });
});
