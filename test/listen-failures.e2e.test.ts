import dgram from 'node:dgram';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { runCommand } from '@cluster-dns/testkit';
import { afterEach, describe, expect, it } from 'vitest';

// Every port of every process, taken by another process first (the first thing a user running
// two forwarders on one host meets: both want 9153), or on an address that is not on this host:
// one line naming the flags, the address and the reason, a hint, and a non-zero exit. Never a
// TypeError from deep inside.
const root = fileURLToPath(new URL('..', import.meta.url));
const main = (pkg: string) => `${root}/packages/${pkg}/dist/main.js`;

const held: Array<net.Server | dgram.Socket> = [];
afterEach(async () => {
  for (const h of held.splice(0))
    await new Promise<void>((resolve) => (h instanceof net.Server ? h.close(() => resolve()) : h.close(resolve)));
});

/** A port taken on 127.0.0.1 for TCP, and for UDP too when `udp`: another process's, as far as ours can tell. */
async function takenPort(udp: boolean): Promise<number> {
  const tcp = net.createServer();
  await new Promise<void>((resolve) => tcp.listen(0, '127.0.0.1', () => resolve()));
  held.push(tcp);
  const port = (tcp.address() as net.AddressInfo).port;
  if (udp) {
    const socket = dgram.createSocket('udp4');
    await new Promise<void>((resolve) => socket.bind(port, '127.0.0.1', () => resolve()));
    held.push(socket);
  }
  return port;
}

/** Flags that put every other port of the process on 127.0.0.1:0, so only the one tested can fail. */
const LOOPBACK: Record<string, string[]> = {
  'record-builder': [
    '--kube-master-url=http://127.0.0.1:1',
    '--dns-bind-address=127.0.0.1',
    '--dns-port=0',
    '--healthz-bind-address=127.0.0.1',
    '--healthz-port=0',
    '--metrics-port=0',
  ],
  forwarder: [
    '-k',
    '--no-resolv',
    '--server=127.0.0.1#1',
    '--listen-address=127.0.0.1',
    '--port=0',
    '--metrics-address=127.0.0.1',
    '--metrics-port=0',
  ],
  sidecar: ['--prometheus-addr=127.0.0.1', '--prometheus-port=0'],
};

const run = (pkg: string, args: string[]) =>
  runCommand(process.execPath, [main(pkg), ...(LOOPBACK[pkg] ?? []), ...args], { timeoutMs: 20_000 });

describe('a port another process holds', () => {
  it.each([
    ['record-builder', 'dns-port', '--dns-bind-address, --dns-port', true],
    ['record-builder', 'healthz-port', '--healthz-bind-address, --healthz-port', false],
    ['record-builder', 'metrics-port', '--healthz-bind-address, --metrics-port', false],
    ['forwarder', 'port', '--listen-address, --port', true],
    ['forwarder', 'metrics-port', '--metrics-address, --metrics-port', false],
    ['sidecar', 'prometheus-port', '--prometheus-addr, --prometheus-port', false],
  ] as const)('%s --%s: exits 1 naming %s, the address and EADDRINUSE, with a hint', async (pkg, flag, named, udp) => {
    const port = await takenPort(udp);
    const out = await run(pkg, [`--${flag}=${port}`]);
    expect(out.status, out.stderr).toBe(1);
    const line = out.stderr.trim();
    expect(line.split('\n')).toHaveLength(1);
    expect(line).toContain(`cannot listen on 127.0.0.1:${port}`);
    expect(line).toContain(`(${named})`);
    expect(line).toContain('EADDRINUSE');
    expect(line).toContain('another process holds this port');
    expect(line).not.toMatch(/TypeError|Cannot read/);
  });
});

describe('an address that is not on this host', () => {
  // 192.0.2.0/24 is TEST-NET-1: on no interface here.
  it.each([
    ['record-builder', ['--dns-bind-address=192.0.2.1'], '--dns-bind-address, --dns-port'],
    ['record-builder', ['--healthz-bind-address=192.0.2.1'], '--healthz-bind-address, --healthz-port'],
    ['forwarder', ['--listen-address=192.0.2.1'], '--listen-address, --port'],
    ['forwarder', ['--metrics-address=192.0.2.1'], '--metrics-address, --metrics-port'],
    ['sidecar', ['--prometheus-addr=192.0.2.1'], '--prometheus-addr, --prometheus-port'],
  ] as const)('%s %j: exits 1 naming %s and EADDRNOTAVAIL, with a hint', async (pkg, args, named) => {
    const out = await run(pkg, [...args]);
    expect(out.status, out.stderr).toBe(1);
    const line = out.stderr.trim();
    expect(line).toContain('cannot listen on 192.0.2.1:');
    expect(line).toContain(`(${named})`);
    expect(line).toContain('EADDRNOTAVAIL');
    expect(line).toContain('not on any interface of this host');
  });
});
