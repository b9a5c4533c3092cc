import { readFileSync } from 'node:fs';
import { ipv4ToNumber, ipv6Groups } from './ip-address.js';

/**
 * The kernel's truesize of a small datagram on a socket's receive queue (a query of up to a few
 * hundred octets, measured on loopback: 832). /proc/net/udp counts a queue in these; the queue's
 * length in queries is its octets over this.
 */
export const QUEUED_DATAGRAM_BYTES = 832;

/** A u32 as /proc/net/udp writes it (%08X). */
const hostOrderHex = (word: number) => word.toString(16).toUpperCase().padStart(8, '0');
/** Big-endian bytes → the u32 a little-endian host reads from them. */
const fromWire = (bytes: number[]) =>
  ((bytes[0] as number) | ((bytes[1] as number) << 8) | ((bytes[2] as number) << 16) | ((bytes[3] as number) << 24)) >>>
  0;

/** `host:port` as /proc/net/udp{,6} spells a local address (x86 and arm64 are little-endian). */
export function procNetAddress(host: string, port: number, family: 4 | 6): string {
  const portHex = port.toString(16).toUpperCase().padStart(4, '0');
  if (family === 4) {
    const n = ipv4ToNumber(host);
    return `${hostOrderHex(fromWire([n >>> 24, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff]))}:${portHex}`;
  }
  const groups = ipv6Groups(host);
  let hex = '';
  for (let i = 0; i < 8; i += 2) {
    const a = groups[i] as number;
    const b = groups[i + 1] as number;
    hex += hostOrderHex(fromWire([a >> 8, a & 0xff, b >> 8, b & 0xff]));
  }
  return `${hex}:${portHex}`;
}

/**
 * A reader of how many octets wait in the receive queue of the UDP sockets bound to host:port
 * (the largest queue among them: with SO_REUSEPORT the workers and a handing-over instance share
 * the address, and the one asking is behind), from /proc/net/udp. Undefined where the file
 * cannot be read (not Linux); the reader returns -1 when no socket matches.
 */
export function udpQueueReader(host: string, port: number, family: 4 | 6): (() => number) | undefined {
  const file = family === 6 ? '/proc/net/udp6' : '/proc/net/udp';
  try {
    readFileSync(file, 'utf8');
  } catch {
    // Not Linux, or /proc is not mounted: the caller does without the queue's length.
    return undefined;
  }
  const local = ` ${procNetAddress(host, port, family)} `;
  return () => {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      // Gone since (a sandbox): unknown this time.
      return -1;
    }
    let queued = -1;
    for (let at = text.indexOf(local); at >= 0; at = text.indexOf(local, at + local.length)) {
      // "  sl  local_address rem_address   st tx_queue:rx_queue …": rx_queue is the 4th field on.
      const fields = text.slice(at, text.indexOf('\n', at)).trim().split(/\s+/);
      const rx = Number.parseInt((fields[3] ?? '').split(':')[1] ?? '', 16);
      if (Number.isFinite(rx) && rx > queued) queued = rx;
    }
    return queued;
  };
}
