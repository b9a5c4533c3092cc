import dgram from 'node:dgram';
import { createServer } from 'node:net';
import { FlagError, type FlagValues, parseGoDurationMs, parseHostPort } from '@cluster-dns/runtime';
import { isDns1123Label } from '@cluster-dns/wire';
import type { demoFlags } from './demo-options.js';

/**
 * The demo's flags checked as the user typed them, before any child starts: a bad value or a
 * port in use is one error naming the demo's flag, not the child's (`--port` for `--dns-port`).
 */
export async function checkDemoValues(values: FlagValues<typeof demoFlags>): Promise<void> {
  if (values.upstream) parseHostPort(values.upstream, 53, '--upstream');
  const domain = values.domain.replace(/\.$/, '');
  if (!domain?.split('.').every(isDns1123Label))
    throw new FlagError('--domain', values.domain, 'DNS-1123 labels separated by dots, such as cluster.local');
  parseGoDurationMs(values.lameduck, '--lameduck');
  const ports: Array<[keyof typeof values, boolean]> = [
    ['dns-port', true],
    ['record-builder-port', true],
    ['healthz-port', false],
    ['metrics-port', false],
    ['sidecar-port', false],
    ['forwarder-metrics-port', false],
  ];
  for (const [flag, dns] of ports) {
    const port = values[flag] as number;
    if (port === 0) continue;
    const problem = (await tcpFree(port)) ?? (dns ? await udpFree(port) : undefined);
    if (problem)
      throw new FlagError(
        `--${flag}`,
        String(port),
        `a free port on 127.0.0.1 (${problem}: another process holds it; stop it, or choose another port, 0 for a free one)`,
      );
  }
}

function tcpFree(port: number): Promise<string | undefined> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
    server.listen({ host: '127.0.0.1', port, exclusive: true }, () => server.close(() => resolve(undefined)));
  });
}

function udpFree(port: number): Promise<string | undefined> {
  return new Promise((resolve) => {
    const socket = dgram.createSocket('udp4');
    socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
    socket.bind(port, '127.0.0.1', () => socket.close(() => resolve(undefined)));
  });
}
