import { Resolver } from 'node:dns/promises';
import { fileURLToPath } from 'node:url';
import { createSilentLogger, type Logger, parseFlags } from '@cluster-dns/runtime';
import {
  type LaunchedProcess,
  launchProcess,
  startTestUpstream,
  type TestUpstream,
  type TestUpstreamOptions,
} from '@cluster-dns/testkit';
import { type DecodedMessage, type QueryOptions, queryDns } from '@cluster-dns/wire';
import { afterEach } from 'vitest';
import { forwarderFlags, toForwarderOptions } from '../src/options.js';
import { createForwarder, type Forwarder } from '../src/server/forwarder.js';

export const MAIN = fileURLToPath(new URL('../dist/main.js', import.meta.url));

/** The built forwarder as its own process on loopback, a free port, everything sent to `server`. */
export function launchForwarder(server: string, extra: readonly string[] = []): Promise<LaunchedProcess> {
  return launchProcess({
    script: MAIN,
    args: [
      '-k',
      '--no-resolv',
      `--server=${server}`,
      '--listen-address=127.0.0.1',
      '--port=0',
      '--lameduck=0s',
      '--metrics-port=0',
      '--metrics-address=127.0.0.1',
      ...extra,
    ],
  });
}

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

export async function upstream(options: TestUpstreamOptions = {}): Promise<TestUpstream> {
  const u = await startTestUpstream(options);
  cleanups.push(() => u.close());
  return u;
}

export interface ForwarderUnderTest {
  forwarder: Forwarder;
  port: number;
  metricsPort: number;
  resolver: Resolver;
  clock: { advance(ms: number): void };
  logs: Array<Record<string, unknown>>;
  query(name: string, type: number, options?: QueryOptions): Promise<DecodedMessage>;
  stat(name: string): Promise<string[]>;
}

/** The forwarder in this process on a free loopback port, with a clock the test moves. */
export async function startForwarder(args: string[]): Promise<ForwarderUnderTest> {
  let nowMs = 1_700_000_000_000;
  const logs: Array<Record<string, unknown>> = [];
  // Tests never read the machine's resolv.conf: its nameservers are not on loopback.
  const resolv = args.some((a) => a.startsWith('--resolv-file')) ? [] : ['--no-resolv'];
  const values = parseFlags(forwarderFlags, [
    '--listen-address=127.0.0.1',
    '--port=0',
    '--lameduck=0s',
    '--metrics-port=0',
    '--metrics-address=127.0.0.1',
    ...resolv,
    ...args,
  ]).values;
  const log: Logger = {
    ...createSilentLogger(),
    level: 'info',
    info: (msg, fields) => logs.push({ level: 'info', msg, ...fields }),
    warn: (msg, fields) => logs.push({ level: 'warn', msg, ...fields }),
    error: (msg, fields) => logs.push({ level: 'error', msg, ...fields }),
    debug: () => {},
    fatal: (msg, fields) => logs.push({ level: 'fatal', msg, ...fields }),
    child: () => log,
  };
  const forwarder = createForwarder(toForwarderOptions(values), { log, now: () => nowMs });
  const { port, metricsPort } = await forwarder.start();
  cleanups.push(() => forwarder.shutdown());
  const resolver = new Resolver({ timeout: 5000, tries: 1 });
  resolver.setServers([`127.0.0.1:${port}`]);
  const query = (name: string, type: number, options?: QueryOptions) =>
    queryDns({ host: '127.0.0.1', port }, name, type, { timeoutMs: 6000, ...options });
  return {
    forwarder,
    port,
    metricsPort,
    resolver,
    logs,
    clock: {
      advance: (ms) => {
        nowMs += ms;
      },
    },
    query,
    stat: async (name) => (await query(`${name}.bind`, 16, { qclass: 3 })).answers.flatMap((a) => a.text ?? []),
  };
}
