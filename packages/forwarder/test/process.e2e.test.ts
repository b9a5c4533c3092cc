import dgram from 'node:dgram';
import { readFileSync } from 'node:fs';
import { runCommand, startTestUpstream, waitFor } from '@cluster-dns/testkit';
import {
  buildQueryMessage,
  decodeMessage,
  encodeMessage,
  QTYPE,
  queryDns,
  RCODE,
  reusePortSupported,
} from '@cluster-dns/wire';
import { afterEach, describe, expect, it } from 'vitest';
import { forwarderFlags } from '../src/options.js';
import { launchForwarder, MAIN } from './harness.js';

const run = (args: string[]) => runCommand(process.execPath, [MAIN, ...args]);
const stops: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const s of stops.splice(0)) await s();
});

const KUBE_DNS_ARGS = [
  '-k',
  '--cache-size=1000',
  '--no-negcache',
  '--dns-loop-detect',
  '--log-facility=-',
  '--server=/cluster.local/127.0.0.1#10053',
  '--server=/in-addr.arpa/127.0.0.1#10053',
  '--server=/ip6.arpa/127.0.0.1#10053',
];

describe('forwarder as a process', () => {
  it('accepts kube-dns manifest arguments unmodified and lists every flag in --help', async () => {
    const out = await run([...KUBE_DNS_ARGS, '--help']);
    expect(out.status).toBe(0);
    for (const name of Object.keys(forwarderFlags)) expect(out.stdout).toContain(`--${name}`);
  });

  it('has every flag in its reference, and the CHAOS names in its README', () => {
    const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
    const reference = readFileSync(new URL('../../../docs/reference/forwarder.md', import.meta.url), 'utf8');
    expect(readme).toContain('docs/reference/forwarder.md');
    for (const name of Object.keys(forwarderFlags)) expect(reference).toContain(`\`--${name}\``);
    for (const n of [
      'cachesize.bind',
      'insertions.bind',
      'evictions.bind',
      'misses.bind',
      'hits.bind',
      'auth.bind',
      'servers.bind',
    ]) {
      expect(readme).toContain(n);
    }
  });

  it.each([
    [['--no-such-thing'], 'unknown flag: --no-such-thing'],
    [['--server=/cluster.local/not-an-ip'], '--server'],
    [['--cache-size=lots'], '--cache-size'],
    [['--min-cache-ttl=60', '--max-cache-ttl=30'], '--min-cache-ttl'],
    [['extra-positional'], 'unknown flag: extra-positional'],
  ])('exits 2 on %j naming it', async (args, message) => {
    const out = await run(args);
    expect(out.status).toBe(2);
    expect(out.stderr).toContain(message);
  });

  // This test's own node: Node 20 on these machines (workers on Node 22: test/workers.e2e.test.ts).
  it.skipIf(reusePortSupported())(
    'refuses --workers above 1 where Node has no SO_REUSEPORT, naming the flag and the version needed',
    async () => {
      const out = await run(['--workers=2', '--port=0', '--metrics-port=0', '--no-resolv']);
      expect(out.status).toBe(2);
      expect(out.stderr).toContain('--workers');
      expect(out.stderr).toContain('Node.js 22.12');
    },
  );

  it('serves, survives malformed packets, and exits 0 on SIGTERM', async () => {
    const up = await startTestUpstream({ records: { 'example.org.': [{ type: QTYPE.A, address: '192.0.2.1' }] } });
    stops.push(() => up.close());
    const proc = await launchForwarder(up.address);
    stops.push(() => proc.stop('SIGKILL'));
    const port = proc.ready.port as number;
    const socket = dgram.createSocket('udp4');
    const replies: Buffer[] = [];
    socket.on('message', (m) => replies.push(m));
    await new Promise<void>((r) => socket.bind(0, '127.0.0.1', () => r()));
    for (let i = 0; i < 20; i++) {
      socket.send(Buffer.from('beef0100000100000000000005abc', 'hex'), port, '127.0.0.1');
      socket.send(Buffer.alloc(3), port, '127.0.0.1');
    }
    // A good query last, on the same socket: its answer comes after every earlier datagram was handled.
    socket.send(encodeMessage(buildQueryMessage(0x7777, 'example.org', QTYPE.A)), port, '127.0.0.1');
    await waitFor(() => replies.some((m) => m.readUInt16BE(0) === 0x7777), {
      what: 'the answer to the good query sent after the malformed ones',
      seen: () => `${replies.length} replies`,
    });
    socket.close();
    const garbage = replies.filter((m) => m.readUInt16BE(0) !== 0x7777);
    expect(garbage.length).toBe(20);
    expect(garbage.every((m) => decodeMessage(m).flags.rcode === RCODE.FORMERR)).toBe(true);
    const reply = await queryDns({ host: '127.0.0.1', port }, 'example.org', QTYPE.A);
    expect(reply.answers.map((a) => a.address)).toEqual(['192.0.2.1']);
    expect(await proc.stop('SIGTERM')).toBe(0);
  });
});
