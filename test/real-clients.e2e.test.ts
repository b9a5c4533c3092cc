import { spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  createNetns,
  type LaunchedProcess,
  launchProcess,
  linkNetns,
  type Netns,
  netnsUnavailable,
} from '@cluster-dns/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('..', import.meta.url));
const FORWARDER = `${root}/packages/forwarder/dist/main.js`;
const UPSTREAM = `${root}/packages/testkit/dist/upstream-cli.js`;
const unavailable = netnsUnavailable();
const has = (command: string, args: string[]) => spawnSync(command, args, { stdio: 'ignore' }).error === undefined;
const tools = {
  musl: has('musl-gcc', ['--version']),
  busybox: has('busybox', ['--help']),
  dig: has('dig', ['-v']),
  getent: has('getent', ['--version']),
};
const INSTALL = 'apt-get install -y bind9-dnsutils musl-tools busybox iproute2';
if (unavailable) console.warn(`skipping the real-client tests: ${unavailable} (.ci/run runs them as root)`);
for (const [tool, present] of Object.entries(tools))
  if (!present) console.warn(`real-client tests: ${tool} is not installed, so its test is skipped; run: ${INSTALL}`);

/** 40 addresses at one name: 12 + 22 + 40 × 16 octets, well over 512. */
const ADDRESSES = Array.from({ length: 40 }, (_, i) => `198.51.100.${i + 1}`);
const NAME = 'many.example.org';

/**
 * Clients this project did not write, resolving through the forwarder on 127.0.0.1:53 of a
 * network namespace whose resolv.conf points there, as a Pod's does: an answer too big for 512
 * octets must still give addresses to the clients that never retry over TCP.
 */
describe.skipIf(unavailable)('real clients and an answer over 512 octets', () => {
  let pod: Netns;
  let node: Netns;
  const procs: LaunchedProcess[] = [];

  beforeAll(async () => {
    pod = createNetns();
    node = createNetns();
    linkNetns(pod, '192.0.2.2/24', node, '192.0.2.53/24');
    const records = { [`${NAME}.`]: ADDRESSES.map((address) => ({ type: 1, address, ttl: 300 })) };
    procs.push(
      await launchProcess({
        prefix: node.prefix,
        script: UPSTREAM,
        args: ['--host=192.0.2.53', '--port=53', `--records=${JSON.stringify(records)}`],
      }),
    );
    procs.push(
      await launchProcess({
        prefix: pod.prefix,
        script: FORWARDER,
        args: [
          '-k',
          '--no-resolv',
          '--server=192.0.2.53#53',
          '--listen-address=127.0.0.1',
          '--lameduck=0s',
          '--metrics-port=0',
          '--metrics-address=127.0.0.1',
        ],
      }),
    );
    pod.writeResolvConf('nameserver 127.0.0.1\noptions attempts:1 timeout:2\n');
  });

  afterAll(async () => {
    for (const p of procs.reverse()) await p.stop('SIGKILL');
    pod?.close();
    node?.close();
  });

  /** A partial answer: at least 20 of the addresses, every one of them real, none twice. */
  const expectUsablePart = (got: string[]) => {
    expect(got.length).toBeGreaterThanOrEqual(20);
    expect(got.length).toBeLessThan(40);
    expect(got.every((a) => ADDRESSES.includes(a))).toBe(true);
    expect(new Set(got).size).toBe(got.length);
  };

  it.skipIf(!tools.musl)('musl getaddrinfo (no EDNS, no TCP retry) gets addresses, from a miss and a hit', () => {
    const dir = mkdtempSync(join(tmpdir(), 'musl-'));
    const binary = join(dir, 'getaddrinfo');
    const built = spawnSync('musl-gcc', ['-static', '-O2', '-o', binary, `${root}/test/clients/getaddrinfo.c`], {
      encoding: 'utf8',
    });
    expect(built.status, built.stderr).toBe(0);
    for (const _attempt of ['miss', 'hit']) expectUsablePart(pod.run(binary, [NAME]).trim().split('\n'));
  });

  it.skipIf(!tools.busybox)('busybox nslookup (no EDNS, no TCP retry) gets addresses', () => {
    const out = pod.run('busybox', ['nslookup', '-type=a', NAME, '127.0.0.1']);
    const addresses = [...out.matchAll(/^Address: (\d+\.\d+\.\d+\.\d+)$/gm)].map((m) => m[1] as string);
    expectUsablePart(addresses);
  });

  it.skipIf(!tools.dig)('dig without EDNS sees TC with whole records, and gets all 40 by retrying over TCP', () => {
    const udpOnly = pod.run('dig', ['@127.0.0.1', '+noedns', '+ignore', '+tries=1', NAME, 'A']);
    expect(udpOnly).toMatch(/flags: qr[a-z ]* tc/);
    expectUsablePart([...udpOnly.matchAll(/\tA\t(\S+)$/gm)].map((m) => m[1] as string));
    const retried = pod.run('dig', ['@127.0.0.1', '+noedns', '+short', NAME, 'A']).trim().split('\n');
    expect(retried.sort()).toEqual([...ADDRESSES].sort());
  });

  it.skipIf(!tools.getent)('glibc getent (retries over TCP on TC) gets all 40', () => {
    const out = pod.run('getent', ['ahostsv4', NAME]);
    const addresses = new Set([...out.matchAll(/^(\S+)\s+STREAM/gm)].map((m) => m[1]));
    expect([...addresses].sort()).toEqual([...ADDRESSES].sort());
  });

  it("Node's resolver (c-ares, retries over TCP on TC) gets all 40", () => {
    const script = `const r=new (require('dns').promises.Resolver)({tries:1});r.setServers(['127.0.0.1']);r.resolve4('${NAME}').then(a=>console.log(a.join(',')))`;
    const out = pod.run(process.execPath, ['-e', script]).trim().split(',');
    expect(out.sort()).toEqual([...ADDRESSES].sort());
  });
});
