import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  createNetns,
  hasCommand,
  type LaunchedProcess,
  launchProcess,
  linkNetns,
  type Netns,
  netnsUnavailable,
  runChecked,
} from '@cluster-dns/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('..', import.meta.url));
const FORWARDER = `${root}/packages/forwarder/dist/main.js`;
const UPSTREAM = `${root}/packages/testkit/dist/upstream-cli.js`;
const unavailable = netnsUnavailable();
const tools = {
  musl: hasCommand('musl-gcc'),
  busybox: hasCommand('busybox'),
  dig: hasCommand('dig'),
  getent: hasCommand('getent'),
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

  it.skipIf(!tools.musl)('musl getaddrinfo (no EDNS, no TCP retry) gets addresses, from a miss and a hit', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'musl-'));
    const binary = join(dir, 'getaddrinfo');
    await runChecked('musl-gcc', ['-static', '-O2', '-o', binary, `${root}/test/clients/getaddrinfo.c`]);
    for (const _attempt of ['miss', 'hit']) expectUsablePart((await pod.run(binary, [NAME])).trim().split('\n'));
  });

  it.skipIf(!tools.busybox)('busybox nslookup (no EDNS, no TCP retry) gets addresses', async () => {
    const out = await pod.run('busybox', ['nslookup', '-type=a', NAME, '127.0.0.1']);
    const addresses = [...out.matchAll(/^Address: (\d+\.\d+\.\d+\.\d+)$/gm)].map((m) => m[1] as string);
    expectUsablePart(addresses);
  });

  it.skipIf(!tools.dig)(
    'dig without EDNS sees TC with whole records, and gets all 40 by retrying over TCP',
    async () => {
      const udpOnly = await pod.run('dig', ['@127.0.0.1', '+noedns', '+ignore', '+tries=1', NAME, 'A']);
      expect(udpOnly).toMatch(/flags: qr[a-z ]* tc/);
      expectUsablePart([...udpOnly.matchAll(/\tA\t(\S+)$/gm)].map((m) => m[1] as string));
      const retried = (await pod.run('dig', ['@127.0.0.1', '+noedns', '+short', NAME, 'A'])).trim().split('\n');
      expect(retried.sort()).toEqual([...ADDRESSES].sort());
    },
  );

  it.skipIf(!tools.getent)('glibc getent (retries over TCP on TC) gets all 40', async () => {
    const out = await pod.run('getent', ['ahostsv4', NAME]);
    const addresses = new Set([...out.matchAll(/^(\S+)\s+STREAM/gm)].map((m) => m[1]));
    expect([...addresses].sort()).toEqual([...ADDRESSES].sort());
  });

  it("Node's resolver (c-ares, retries over TCP on TC) gets all 40", async () => {
    const script = `const r=new (require('dns').promises.Resolver)({tries:1});r.setServers(['127.0.0.1']);r.resolve4('${NAME}').then(a=>console.log(a.join(',')))`;
    const out = (await pod.run(process.execPath, ['-e', script])).trim().split(',');
    expect(out.sort()).toEqual([...ADDRESSES].sort());
  });
});
