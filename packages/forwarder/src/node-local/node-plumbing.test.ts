import { createLogger } from '@cluster-dns/runtime';
import { describe, expect, it } from 'vitest';
import {
  type CommandRunner,
  desiredRules,
  NFT_TABLE,
  NodePlumbing,
  nftScript,
  ourSavedRules,
  type PlumbingConfig,
  RULE_COMMENT,
} from './node-plumbing.js';

const log = createLogger({ component: 'test', level: 'error', write: () => undefined });

/**
 * A node as `ip`, `iptables(-legacy)(-save)` and `nft` show it: enough state for the plumbing's
 * commands, printed as the real tools print it (the network-namespace test runs the real ones).
 */
class FakeNode {
  links = new Map<string, { up: boolean; addresses: string[] }>();
  tables: Record<'raw' | 'filter', string[]> = { raw: [], filter: [] };
  /** ip6tables' own tables: a dual-stack node's IPv6 rules live apart from the IPv4 ones. */
  tables6: Record<'raw' | 'filter', string[]> = { raw: [], filter: [] };
  nft: string | undefined;
  commands: string[] = [];
  lockBusy = false;

  run: CommandRunner = async (command, args, input) => {
    this.commands.push([command, ...args].join(' '));
    const ok = (stdout = '') => ({ code: 0, stdout, stderr: '' });
    const fail = (stderr: string, code = 1) => ({ code, stdout: '', stderr });
    if (command === 'ip') {
      const a = args.join(' ');
      const name = args.at(-1) as string;
      if (a.startsWith('-o link show dev')) {
        const link = this.links.get(name);
        return link
          ? ok(`5: ${name}: <BROADCAST,NOARP${link.up ? ',UP,LOWER_UP' : ''}> mtu 1500\n`)
          : fail(`Device "${name}" does not exist.`);
      }
      if (a.startsWith('link add')) {
        this.links.set(args[2] as string, { up: false, addresses: [] });
        return ok();
      }
      if (a.startsWith('-o addr show dev'))
        return ok(
          (this.links.get(name)?.addresses ?? [])
            .map((ip) => {
              const [address, plen = ip.includes(':') ? '128' : '32'] = ip.split('/');
              return `5: ${name}    ${ip.includes(':') ? 'inet6' : 'inet'} ${address}/${plen} scope global ${name}\n`;
            })
            .join(''),
        );
      if (a.startsWith('addr add')) {
        const dev = args[args.indexOf('dev') + 1] as string;
        this.links.get(dev)?.addresses.push(args[2] as string);
        return ok();
      }
      if (a.startsWith('link set')) {
        const link = this.links.get(args[2] as string);
        if (link) link.up = true;
        return ok();
      }
      if (a.startsWith('link del')) return this.links.delete(args[2] as string) ? ok() : fail('no such device');
    }
    const tables = command.startsWith('ip6') ? this.tables6 : this.tables;
    if (/^ip6?tables(-legacy)?-save$/.test(command)) {
      const table = args[1] as 'raw' | 'filter';
      return ok(`*${table}\n${tables[table].join('\n')}\nCOMMIT\n`);
    }
    if (/^ip6?tables(-legacy)?$/.test(command)) {
      if (this.lockBusy) return fail('Another app is currently holding the xtables lock. Stopped waiting after 5s.', 4);
      const table = args[3] as 'raw' | 'filter';
      const op = args[4];
      const chain = args[5] as string;
      const rest = (op === '-I' ? args.slice(7) : args.slice(6)).map((w) => (w === RULE_COMMENT ? `"${w}"` : w));
      const line = `-A ${chain} ${rest.join(' ')}`;
      if (op === '-I') {
        tables[table].unshift(line);
        return ok();
      }
      const at = tables[table].indexOf(line);
      if (at === -1) return fail('iptables: Bad rule (does a matching rule exist in that chain?).');
      tables[table].splice(at, 1);
      return ok();
    }
    if (command === 'nft') {
      if (args[0] === '-f') {
        this.nft = `table inet ${NFT_TABLE} { # applied\n${input}}\n`;
        return ok();
      }
      if (args[0] === 'list') return this.nft === undefined ? fail('No such file or directory') : ok(this.nft);
      if (args[0] === 'delete') {
        this.nft = undefined;
        return ok();
      }
    }
    return fail(`unexpected command ${command} ${args.join(' ')}`, 127);
  };

  ours(family: 4 | 6 = 4): string[] {
    const t = family === 6 ? this.tables6 : this.tables;
    return [...t.raw, ...t.filter].filter((l) => l.includes(RULE_COMMENT));
  }
}

const config = (over: Partial<PlumbingConfig> = {}): PlumbingConfig => ({
  localIps: ['169.254.20.10', '10.96.0.10'],
  port: 53,
  healthPort: 8080,
  interfaceName: 'nodelocaldns',
  interfaceType: 'dummy',
  setupInterface: true,
  setupRules: true,
  firewall: 'iptables',
  ...over,
});

describe('NodePlumbing', () => {
  it('sets up the link, its addresses and node-cache’s 12 rules per IP, then finds nothing to do', async () => {
    const node = new FakeNode();
    const plumbing = new NodePlumbing(config(), node.run, log);
    const first = await plumbing.sync();
    expect(first).toMatchObject({
      interfaceAdded: true,
      addressesAdded: ['169.254.20.10', '10.96.0.10'],
      rulesAdded: 24,
    });
    expect(node.commands).toContain('ip link add nodelocaldns type dummy');
    expect(node.links.get('nodelocaldns')).toEqual({ up: true, addresses: ['169.254.20.10/32', '10.96.0.10/32'] });
    expect(node.ours()).toHaveLength(24);
    expect(node.tables.raw).toContain(
      `-A PREROUTING -d 169.254.20.10/32 -p udp -m udp --dport 53 -m comment --comment "${RULE_COMMENT}" -j NOTRACK`,
    );
    expect(node.tables.raw).toContain(
      `-A OUTPUT -d 10.96.0.10/32 -p tcp -m tcp --dport 8080 -m comment --comment "${RULE_COMMENT}" -j NOTRACK`,
    );
    expect(node.tables.filter).toContain(
      `-A INPUT -d 10.96.0.10/32 -p tcp -m tcp --dport 53 -m comment --comment "${RULE_COMMENT}" -j ACCEPT`,
    );
    for (let i = 0; i < 3; i++) {
      node.commands = [];
      const again = await plumbing.sync();
      expect(again).toMatchObject({ interfaceAdded: false, addressesAdded: [], rulesAdded: 0, duplicatesRemoved: 0 });
      // Only listings: nothing is added, nothing is checked rule by rule.
      expect(node.commands.filter((c) => / -[IDA] /.test(c) || c.includes(' add '))).toEqual([]);
    }
    expect(node.ours()).toHaveLength(24);
  });

  it('dual-stack: IPv6 addresses with /128 beside the IPv4 ones, each family’s rules in its own iptables, and both torn down', async () => {
    const node = new FakeNode();
    const dual = config({ localIps: ['169.254.20.10', 'fd00:169:254:20::10', '10.96.0.10', 'fd01::a'] });
    const plumbing = new NodePlumbing(dual, node.run, log);
    const report = await plumbing.sync();
    expect(report.errors).toEqual([]);
    expect(node.links.get('nodelocaldns')?.addresses).toEqual([
      '169.254.20.10/32',
      'fd00:169:254:20::10/128',
      '10.96.0.10/32',
      'fd01::a/128',
    ]);
    expect(node.commands).toContain('ip addr add fd01::a/128 dev nodelocaldns nodad');
    expect(node.ours(4)).toHaveLength(24);
    expect(node.ours(6)).toHaveLength(24);
    expect(node.ours(4).every((l) => !l.includes(':'))).toBe(true);
    expect(node.ours(6).every((l) => /-[ds] (fd00:169:254:20::10|fd01::a)\/128 /.test(l))).toBe(true);
    expect((await plumbing.sync()).rulesAdded).toBe(0);
    // A config back to IPv4 alone takes its IPv6 rules away.
    await new NodePlumbing(config(), node.run, log).sync();
    expect([node.ours(4).length, node.ours(6).length]).toEqual([24, 0]);
    await new NodePlumbing(dual, node.run, log).sync();
    await plumbing.teardown();
    expect([node.ours(4), node.ours(6)]).toEqual([[], []]);
  });

  it('an IPv4 node without ip6tables is no error', async () => {
    const node = new FakeNode();
    const run: CommandRunner = (command, args, input) =>
      command.startsWith('ip6tables')
        ? Promise.resolve({ code: 127, stdout: '', stderr: 'not found' })
        : node.run(command, args, input);
    const plumbing = new NodePlumbing(config(), run, log);
    expect((await plumbing.sync()).errors).toEqual([]);
    await plumbing.teardown();
    expect(node.ours()).toEqual([]);
  });

  it('repairs what a killed instance left: doubled rules, a rule of an old IP, a missing address', async () => {
    const node = new FakeNode();
    const old = new NodePlumbing(config({ localIps: ['169.254.20.10', '10.96.0.99'] }), node.run, log);
    await old.sync();
    // An older iptables that failed the "exists" check added everything again (kubernetes/dns#568).
    node.tables.raw = [...node.tables.raw, ...node.tables.raw];
    node.tables.filter.push('-A INPUT -j KUBE-FIREWALL');
    const link = node.links.get('nodelocaldns');
    if (link) link.addresses = ['169.254.20.10'];
    const plumbing = new NodePlumbing(config(), node.run, log);
    const report = await plumbing.sync();
    expect(report.addressesAdded).toEqual(['10.96.0.10']);
    // The 16 doubled raw rules, then the old IP's 8 raw and 4 filter rules.
    expect(report.duplicatesRemoved).toBe(16 + 8 + 4);
    const fresh = new FakeNode();
    await new NodePlumbing(config(), fresh.run, log).sync();
    expect(node.ours().sort()).toEqual(fresh.ours().sort());
    expect(node.ours()).toHaveLength(desiredRules(config()).length);
    expect(node.tables.filter).toContain('-A INPUT -j KUBE-FIREWALL');
  });

  it('tears down every rule of ours, duplicates too, and the link, and leaves the node’s own rules', async () => {
    const node = new FakeNode();
    const plumbing = new NodePlumbing(config({ firewall: 'iptables-legacy' }), node.run, log);
    await plumbing.sync();
    node.tables.filter = [...node.tables.filter, ...node.tables.filter, '-A INPUT -j KUBE-FIREWALL'];
    await plumbing.teardown();
    expect(node.ours()).toEqual([]);
    expect(node.tables.filter).toEqual(['-A INPUT -j KUBE-FIREWALL']);
    expect(node.links.size).toBe(0);
    expect(node.commands.some((c) => c.startsWith('iptables-legacy -w 5 -t filter -D'))).toBe(true);
  });

  it('counts a busy xtables lock as node-cache does (iptables_lock), and adds the rules at the next sync', async () => {
    const node = new FakeNode();
    node.lockBusy = true;
    const plumbing = new NodePlumbing(config(), node.run, log);
    expect((await plumbing.sync()).errors).toEqual(['iptables_lock']);
    node.lockBusy = false;
    expect((await plumbing.sync()).rulesAdded).toBe(24);
  });

  it('with nft, replaces its own table whole when it is missing or changed, and leaves it when intact', async () => {
    const node = new FakeNode();
    const plumbing = new NodePlumbing(config({ firewall: 'nft' }), node.run, log);
    expect((await plumbing.sync()).rulesAdded).toBe(24);
    expect(node.nft).toContain('ip daddr 169.254.20.10 udp dport 53 notrack');
    node.commands = [];
    expect((await plumbing.sync()).rulesAdded).toBe(0);
    expect(node.commands).toEqual([
      'ip -o link show dev nodelocaldns',
      'ip -o addr show dev nodelocaldns',
      `nft list table inet ${NFT_TABLE}`,
    ]);
    node.nft = `table inet ${NFT_TABLE} { }\n`;
    expect((await plumbing.sync()).rulesAdded).toBe(24);
    await plumbing.teardown();
    expect(node.nft).toBeUndefined();
  });

  it('writes one nft transaction that creates the table if absent, then deletes and rebuilds it', () => {
    const script = nftScript(config());
    expect(script.split('\n').slice(0, 3)).toEqual([
      `table inet ${NFT_TABLE} {}`,
      `delete table inet ${NFT_TABLE}`,
      `table inet ${NFT_TABLE} {`,
    ]);
    expect(script.match(/ notrack$/gm)).toHaveLength(16);
    expect(script.match(/ accept$/gm)).toHaveLength(8);
    expect(script).toContain('type filter hook prerouting priority raw; policy accept;');
    expect(nftScript(config({ localIps: ['fd00::a'] }))).toContain('ip6 daddr fd00::a tcp dport 53 notrack');
    // Dual-stack: one inet table holds both families' rules.
    const dual = nftScript(config({ localIps: ['169.254.20.10', 'fd00::a'] }));
    expect(dual).toContain('ip daddr 169.254.20.10 udp dport 53 notrack');
    expect(dual).toContain('ip6 saddr fd00::a udp sport 53 accept');
  });

  it('reads iptables-save lines, quotes and all', () => {
    const [rule] = ourSavedRules(
      `*raw\n-A OUTPUT -s 169.254.20.10/32 -p tcp -m tcp --sport 8080 -m comment --comment "${RULE_COMMENT}" -j NOTRACK\n-A OUTPUT -j OTHER\n`,
    );
    expect(rule?.key).toBe('OUTPUT tcp s 169.254.20.10 8080 NOTRACK');
    expect(rule?.args).toContain(RULE_COMMENT);
  });
});
