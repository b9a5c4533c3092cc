import dgram from 'node:dgram';
import { readFileSync } from 'node:fs';
import net from 'node:net';

/** The kernel's ephemeral range, from which every `port: 0` bind on this machine is served. */
function ephemeralRange(): [number, number] {
  try {
    const [low, high] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    if (low && high) return [low, high];
  } catch {
    // Not Linux: assume IANA's dynamic range.
  }
  return [49152, 65535];
}

async function bindsBoth(port: number, host: string): Promise<boolean> {
  const tcp = net.createServer();
  const tcpFree = await new Promise<boolean>((resolve) => {
    tcp.once('error', () => resolve(false));
    tcp.listen(port, host, () => resolve(true));
  });
  if (!tcpFree) return false;
  const udp = dgram.createSocket('udp4');
  const udpFree = await new Promise<boolean>((resolve) => {
    udp.once('error', () => resolve(false));
    udp.bind(port, host, () => resolve(true));
  });
  udp.close();
  await new Promise<void>((resolve) => tcp.close(() => resolve()));
  return udpFree;
}

/**
 * A port free on loopback for both UDP and TCP now, for a process another must be told about
 * before it starts (the forwarder a record-builder NOTIFYs). Picked at random below the kernel's
 * ephemeral range: a port the kernel handed out for `port: 0` could be handed to another test's
 * socket before ours binds it (a race seen in CI); below the range only another pick can collide.
 */
export async function freePort(host = '127.0.0.1'): Promise<number> {
  const [low] = ephemeralRange();
  const floor = Math.max(1024, low - 12_000);
  for (;;) {
    const port = floor + Math.floor(Math.random() * (low - floor));
    if (await bindsBoth(port, host)) return port;
  }
}
