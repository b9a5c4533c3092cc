import { writeFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
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
} from '@cluster-dns/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// A dual-stack node cache (kubernetes-sigs/node-local-dns#39): -localip holds an IPv6 address of
// fd00::/8 beside 169.254.20.10, the link carries both, each family's NOTRACK and ACCEPT rules go
// where that family's packets are filtered (nft's inet table; iptables and ip6tables), and a pod
// with both families asks over each. A "node" and a "pod" network namespace made here.

const root = fileURLToPath(new URL('..', import.meta.url));
const NODE_CACHE = `${root}/packages/forwarder/dist/node-cache-main.js`;
const V4 = '169.254.20.10';
const V6 = 'fd00:169:254:20::10';
const unavailable = netnsUnavailable();
const firewalls = (['nft', 'iptables-legacy', 'iptables'] as const).filter((f) => hasCommand(f));

/** Our rules in one family, as the node's own tools list them. */
async function rulesOf(node: Netns, firewall: string, family: 4 | 6): Promise<string[]> {
  if (firewall === 'nft') {
    const listed = await node.run('nft', ['list', 'ruleset']);
    const match = family === 6 ? /^ip6 [sd]addr / : /^ip [sd]addr /;
    return listed
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => match.test(l) && / (notrack|accept)$/.test(l));
  }
  const save = `${family === 6 ? firewall.replace('iptables', 'ip6tables') : firewall}-save`;
  return (await node.run(save, [])).split('\n').filter((l) => l.includes('cluster-dns node-local'));
}

describe.skipIf(unavailable || firewalls.length === 0 || !hasCommand('dig'))('a dual-stack node cache', () => {
  let node: Netns;
  let pod: Netns;
  let dir: string;
  const procs: LaunchedProcess[] = [];

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'dual-stack-'));
    node = createNetns();
    pod = createNetns();
    linkNetns(pod, '10.1.0.2/24', node, '10.1.0.1/24', { a: 'fd10::2/64', b: 'fd10::1/64' });
    await pod.run('ip', ['route', 'add', `${V4}/32`, 'via', '10.1.0.1']);
    await pod.run('ip', ['-6', 'route', 'add', `${V6}/128`, 'via', 'fd10::1']);
    procs.push(
      await launchProcess({
        prefix: node.prefix,
        script: `${root}/packages/testkit/dist/upstream-cli.js`,
        args: [
          '--host=127.0.0.1',
          '--port=5300',
          '--records={"www.example.org.":[{"type":1,"address":"192.0.2.80"},{"type":28,"address":"2001:db8::80"}]}',
        ],
      }),
    );
    // The manifest's Corefile, reduced to the outside block, binding both families.
    writeFileSync(
      join(dir, 'Corefile.base'),
      `.:53 {\n    errors\n    cache 30\n    bind ${V4} ${V6}\n    forward . 127.0.0.1:5300\n    prometheus :9253\n    health ${V4}:8080\n}\n`,
    );
    writeFileSync(join(dir, 'resolv.conf'), 'nameserver 127.0.0.1\n');
  });

  afterAll(async () => {
    for (const p of procs.reverse()) await p.stop('SIGKILL');
    pod?.close();
    node?.close();
  });

  describe.each(firewalls.map((f) => [f]))('with %s', (firewall) => {
    it('puts both addresses on the link, each family’s rules in place, answers over both, and takes it all away at the end', async () => {
      const cache = await launchProcess({
        prefix: node.prefix,
        script: NODE_CACHE,
        readyMsg: 'node cache ready',
        args: [
          '-localip',
          `${V4},${V6}`,
          '-conf',
          join(dir, `Corefile-${firewall}`),
          '-basecorefile',
          join(dir, 'Corefile.base'),
          `-resolv-file=${join(dir, 'resolv.conf')}`,
          '-pidfile',
          join(dir, `node-cache-${firewall}.pid`),
          '-interface-type=bridge',
          `-firewall=${firewall}`,
          '-metrics-listen-address=127.0.0.1:9353',
        ],
      });
      procs.push(cache);
      const link = await node.run('ip', ['-o', 'addr', 'show', 'dev', 'nodelocaldns']);
      expect(link).toContain(`inet ${V4}/32`);
      expect(link).toContain(`inet6 ${V6}/128`);
      // node-cache's 12 per address, in the family's own place.
      const v4 = await rulesOf(node, firewall, 4);
      const v6 = await rulesOf(node, firewall, 6);
      expect([v4.length, v6.length]).toEqual([12, 12]);
      expect(v6.every((r) => r.includes(V6))).toBe(true);
      expect(v4.every((r) => r.includes(V4))).toBe(true);

      const dig = async (server: string, ...args: string[]) =>
        (await pod.run('dig', [`@${server}`, '+short', '+tries=1', '+time=2', ...args])).trim();
      expect(await dig(V6, 'www.example.org', 'AAAA')).toBe('2001:db8::80');
      expect(await dig(V6, '+tcp', 'www.example.org', 'A')).toBe('192.0.2.80');
      expect(await dig(V4, 'www.example.org', 'AAAA')).toBe('2001:db8::80');
      // Untracked, as the rules say: the IPv6 queries left no conntrack entry for the local address.
      if (hasCommand('conntrack')) expect(await node.run('conntrack', ['-L', '-d', V6])).not.toContain(V6);

      await cache.stop('SIGTERM');
      expect([await rulesOf(node, firewall, 4), await rulesOf(node, firewall, 6)]).toEqual([[], []]);
    });
  });
});
