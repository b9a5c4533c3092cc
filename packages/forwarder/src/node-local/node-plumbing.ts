import { isIP } from 'node:net';
import { ClusterDnsError, type Logger } from '@cluster-dns/runtime';

/** Runs a command to its end; never rejects for a non-zero exit (the caller reads `code`). */
export type CommandRunner = (
  command: string,
  args: readonly string[],
  input?: string,
) => Promise<{ code: number; stdout: string; stderr: string }>;

/** A command of the node's setup that failed, with what it said. */
export class NodeSetupError extends ClusterDnsError {
  constructor(
    readonly errortype: SetupErrorType,
    command: string,
    detail: string,
  ) {
    super('NODE_SETUP_FAILED', `${command}: ${detail.trim() || 'failed'}`, {
      hint: 'node-local mode needs NET_ADMIN, the ip, iptables and nft commands, and the xtables lock mounted',
    });
  }
}

/** node-cache's `coredns_nodecache_setup_errors_total` label values, and ours for nft. */
export type SetupErrorType = 'interface_add' | 'interface_check' | 'iptables' | 'iptables_lock' | 'nft';

export type Firewall = 'nft' | 'iptables' | 'iptables-legacy';

export interface PlumbingConfig {
  /** `-localip`: IPv4, IPv6, or both (a dual-stack node). */
  readonly localIps: readonly string[];
  readonly port: number;
  readonly healthPort: number;
  readonly interfaceName: string;
  /** `dummy` on a node; a test on a kernel without it passes another (see the node-local README beside it). */
  readonly interfaceType: string;
  readonly setupInterface: boolean;
  readonly setupRules: boolean;
  readonly firewall: Firewall;
}

/** Marks every iptables rule of ours, so a later instance finds them whatever its config. */
export const RULE_COMMENT = 'cluster-dns node-local';
/** Our own nft table: everything of ours lives in it, so it is replaced or deleted whole. */
export const NFT_TABLE = 'cluster_dns_node_local';

interface IptablesRule {
  readonly table: 'raw' | 'filter';
  readonly chain: 'PREROUTING' | 'OUTPUT' | 'INPUT';
  readonly proto: 'tcp' | 'udp';
  readonly dir: 'd' | 's';
  readonly ip: string;
  readonly port: number;
  readonly target: 'NOTRACK' | 'ACCEPT';
}

/** node-cache's rules (cmd/node-cache/app/cache_app.go), per local IP. */
export function desiredRules(config: Pick<PlumbingConfig, 'localIps' | 'port' | 'healthPort'>): IptablesRule[] {
  const out: IptablesRule[] = [];
  const { port, healthPort } = config;
  for (const ip of config.localIps) {
    for (const proto of ['tcp', 'udp'] as const) {
      out.push(
        // Queries to the cache and its answers skip conntrack: no table to fill, no race (k/k#56903).
        { table: 'raw', chain: 'PREROUTING', proto, dir: 'd', ip, port, target: 'NOTRACK' },
        { table: 'raw', chain: 'OUTPUT', proto, dir: 's', ip, port, target: 'NOTRACK' },
        // hostNetwork pods' own queries, made on this node.
        { table: 'raw', chain: 'OUTPUT', proto, dir: 'd', ip, port, target: 'NOTRACK' },
        // Untracked packets need their own ACCEPT before a filter rule that wants a state.
        { table: 'filter', chain: 'INPUT', proto, dir: 'd', ip, port, target: 'ACCEPT' },
        { table: 'filter', chain: 'OUTPUT', proto, dir: 's', ip, port, target: 'ACCEPT' },
      );
    }
    // The kubelet's liveness probe of /health.
    out.push(
      { table: 'raw', chain: 'OUTPUT', proto: 'tcp', dir: 'd', ip, port: healthPort, target: 'NOTRACK' },
      { table: 'raw', chain: 'OUTPUT', proto: 'tcp', dir: 's', ip, port: healthPort, target: 'NOTRACK' },
    );
  }
  return out;
}

const ruleKey = (r: Omit<IptablesRule, 'table'>) => `${r.chain} ${r.proto} ${r.dir} ${r.ip} ${r.port} ${r.target}`;

/** An address family, as iptables (iptables or ip6tables) and the link's prefix lengths split them. */
type Family = 4 | 6;
const familyOf = (ip: string): Family => (isIP(ip) === 6 ? 6 : 4);
const hostPrefix = (ip: string) => (familyOf(ip) === 6 ? 128 : 32);

/** The arguments after `-t table -I/-D chain`. */
function ruleArgs(r: IptablesRule): string[] {
  return [
    r.dir === 'd' ? '-d' : '-s',
    `${r.ip}/${hostPrefix(r.ip)}`,
    '-p',
    r.proto,
    '-m',
    r.proto,
    r.dir === 'd' ? '--dport' : '--sport',
    String(r.port),
    '-m',
    'comment',
    '--comment',
    RULE_COMMENT,
    '-j',
    r.target,
  ];
}

/** Splits an iptables-save line into words, honouring its double quotes. */
export function saveWords(line: string): string[] {
  const out: string[] = [];
  const re = /"((?:[^"\\]|\\.)*)"|(\S+)/g;
  for (let m = re.exec(line); m; m = re.exec(line))
    out.push(m[1] !== undefined ? m[1].replace(/\\(.)/g, '$1') : (m[2] as string));
  return out;
}

/** Our rules in iptables-save output of one table: each with its key and the words that delete it. */
export function ourSavedRules(save: string): Array<{ key: string | undefined; chain: string; args: string[] }> {
  const out: Array<{ key: string | undefined; chain: string; args: string[] }> = [];
  for (const line of save.split('\n')) {
    if (!line.startsWith('-A ') || !line.includes(RULE_COMMENT)) continue;
    const words = saveWords(line);
    const chain = words[1] as string;
    const args = words.slice(2);
    const value = (flag: string) => {
      const i = args.indexOf(flag);
      return i === -1 ? undefined : args[i + 1];
    };
    const dst = value('-d');
    const src = value('-s');
    const ip = (dst ?? src)?.replace(/\/\d+$/, '');
    const port = value('--dport') ?? value('--sport');
    const proto = value('-p');
    const target = value('-j');
    const key =
      ip && port && proto && target && (dst === undefined) !== (src === undefined)
        ? `${chain} ${proto} ${dst ? 'd' : 's'} ${ip} ${port} ${target}`
        : undefined;
    out.push({ key, chain, args });
  }
  return out;
}

/** The nft ruleset of ours, as one transaction that replaces the table whole. */
export function nftScript(config: Pick<PlumbingConfig, 'localIps' | 'port' | 'healthPort'>): string {
  const family = (ip: string) => (isIP(ip) === 6 ? 'ip6' : 'ip');
  const chains: Record<'prerouting' | 'output_raw' | 'input' | 'output', string[]> = {
    prerouting: [],
    output_raw: [],
    input: [],
    output: [],
  };
  for (const r of desiredRules(config)) {
    const match = `${family(r.ip)} ${r.dir === 'd' ? 'daddr' : 'saddr'} ${r.ip} ${r.proto} ${r.dir === 'd' ? 'dport' : 'sport'} ${r.port}`;
    const chain =
      r.table === 'raw'
        ? r.chain === 'PREROUTING'
          ? 'prerouting'
          : 'output_raw'
        : r.chain === 'INPUT'
          ? 'input'
          : 'output';
    chains[chain].push(`${match} ${r.target === 'NOTRACK' ? 'notrack' : 'accept'}`);
  }
  const chain = (name: string, hook: string, priority: string, rules: string[]) => [
    `  chain ${name} {`,
    `    type filter hook ${hook} priority ${priority}; policy accept;`,
    ...rules.map((r) => `    ${r}`),
    '  }',
  ];
  // Declaring the table first makes the delete succeed on a node that has none yet.
  return [
    `table inet ${NFT_TABLE} {}`,
    `delete table inet ${NFT_TABLE}`,
    `table inet ${NFT_TABLE} {`,
    `  comment "${RULE_COMMENT}: NOTRACK and ACCEPT for the node's DNS cache"`,
    ...chain('prerouting', 'prerouting', 'raw', chains.prerouting),
    ...chain('output_raw', 'output', 'raw', chains.output_raw),
    ...chain('input', 'input', 'filter', chains.input),
    ...chain('output', 'output', 'filter', chains.output),
    '}',
    '',
  ].join('\n');
}

export interface SyncReport {
  interfaceAdded: boolean;
  addressesAdded: string[];
  rulesAdded: number;
  duplicatesRemoved: number;
  /** Errors by node-cache's label, each also logged. */
  errors: SetupErrorType[];
}

/**
 * The node's side of node-local mode: a link holding the local IPs, and the rules that take DNS
 * to them out of conntrack. `sync` is idempotent and is run at start and every -syncinterval:
 * it adds what is missing and removes what is doubled, so the rules are never duplicated, even
 * after a SIGKILL left a previous instance's behind (kubernetes/dns#438, #568). Only commands: no
 * state kept between syncs but the nft listing last applied.
 */
export class NodePlumbing {
  private nftApplied: string | undefined;
  /** The families of -localip: each has its own iptables (iptables, ip6tables). */
  private readonly families: readonly Family[];

  constructor(
    private readonly config: PlumbingConfig,
    private readonly run: CommandRunner,
    private readonly log: Logger,
  ) {
    this.families = localFamilies(config.localIps);
  }

  private async must(errortype: SetupErrorType, command: string, args: readonly string[], input?: string) {
    const result = await this.run(command, args, input);
    if (result.code !== 0) {
      const type: SetupErrorType =
        errortype === 'iptables' && /xtables lock|holding the xtables/.test(result.stderr)
          ? 'iptables_lock'
          : errortype;
      throw new NodeSetupError(type, `${command} ${args.join(' ')}`, result.stderr || result.stdout);
    }
    return result.stdout;
  }

  /** Creates the link and its addresses if missing; true when the link was created. */
  async ensureInterface(report: SyncReport = emptyReport()): Promise<SyncReport> {
    if (!this.config.setupInterface) return report;
    const name = this.config.interfaceName;
    try {
      const shown = await this.run('ip', ['-o', 'link', 'show', 'dev', name]);
      if (shown.code !== 0) {
        await this.must('interface_add', 'ip', ['link', 'add', name, 'type', this.config.interfaceType]);
        report.interfaceAdded = true;
        this.log.info('added interface', { interface: name, type: this.config.interfaceType });
      }
      const addresses = await this.must('interface_check', 'ip', ['-o', 'addr', 'show', 'dev', name]);
      for (const ip of this.config.localIps) {
        if (new RegExp(`\\sinet6? ${ip.replaceAll('.', '\\.')}/`).test(addresses)) continue;
        // nodad: an IPv6 address is usable at once, not after duplicate detection (it is the node's own).
        const dad = familyOf(ip) === 6 ? ['nodad'] : [];
        await this.must('interface_add', 'ip', ['addr', 'add', `${ip}/${hostPrefix(ip)}`, 'dev', name, ...dad]);
        report.addressesAdded.push(ip);
      }
      if (!/[<,]UP[,>]/.test(shown.code === 0 ? shown.stdout : '') || report.interfaceAdded)
        await this.must('interface_check', 'ip', ['link', 'set', name, 'up']);
    } catch (error) {
      this.noteError(report, error, 'interface_check');
    }
    return report;
  }

  /** Adds missing rules and removes doubled or stale ones of ours. */
  async ensureRules(report: SyncReport = emptyReport()): Promise<SyncReport> {
    if (!this.config.setupRules) return report;
    try {
      if (this.config.firewall === 'nft') await this.ensureNft(report);
      else await this.ensureIptables(report);
    } catch (error) {
      this.noteError(report, error, this.config.firewall === 'nft' ? 'nft' : 'iptables');
    }
    return report;
  }

  async sync(): Promise<SyncReport> {
    const report = emptyReport();
    await this.ensureInterface(report);
    await this.ensureRules(report);
    if (
      report.interfaceAdded ||
      report.addressesAdded.length > 0 ||
      report.rulesAdded > 0 ||
      report.duplicatesRemoved > 0
    )
      this.log.info('repaired the node’s setup', { ...report });
    else this.log.debug('node setup checked', { errors: report.errors });
    return report;
  }

  /** Removes the link and every rule of ours (all of them, duplicates too). */
  async teardown(): Promise<void> {
    if (this.config.setupRules) {
      try {
        if (this.config.firewall === 'nft') {
          const listed = await this.run('nft', ['list', 'table', 'inet', NFT_TABLE]);
          if (listed.code === 0) await this.must('nft', 'nft', ['delete', 'table', 'inet', NFT_TABLE]);
          this.nftApplied = undefined;
        } else {
          for (const family of [4, 6] as const)
            for (const table of ['raw', 'filter'] as const) {
              const saved = await this.save(family, table);
              for (const rule of ourSavedRules(saved ?? ''))
                await this.must('iptables', this.iptables(family), [
                  '-w',
                  '5',
                  '-t',
                  table,
                  '-D',
                  rule.chain,
                  ...rule.args,
                ]);
            }
        }
      } catch (error) {
        this.log.error('could not remove the rules', { err: error });
      }
    }
    if (this.config.setupInterface) {
      const shown = await this.run('ip', ['-o', 'link', 'show', 'dev', this.config.interfaceName]);
      if (shown.code === 0) {
        const removed = await this.run('ip', ['link', 'del', this.config.interfaceName]);
        if (removed.code !== 0) this.log.error('could not remove the interface', { stderr: removed.stderr.trim() });
      }
    }
  }

  private iptables(family: Family): string {
    const base = family === 6 ? 'ip6tables' : 'iptables';
    return this.config.firewall === 'iptables-legacy' ? `${base}-legacy` : base;
  }

  /**
   * A table's rules in one family. A family -localip has none of is read only to remove what a
   * previous config left there: a node without IPv6 (no ip6tables) is then no error, undefined.
   */
  private save(family: Family, table: 'raw' | 'filter'): Promise<string | undefined> {
    const base = family === 6 ? 'ip6tables' : 'iptables';
    const command = this.config.firewall === 'iptables-legacy' ? `${base}-legacy-save` : `${base}-save`;
    if (this.families.includes(family)) return this.must('iptables', command, ['-t', table]);
    return this.run(command, ['-t', table]).then(
      (r) => (r.code === 0 ? r.stdout : undefined),
      () => undefined,
    );
  }

  /** Each family's rules in its own iptables; rules of ours in a family -localip no longer has go. */
  private async ensureIptables(report: SyncReport): Promise<void> {
    const desired = desiredRules(this.config);
    for (const family of [4, 6] as const)
      for (const table of ['raw', 'filter'] as const) {
        const saved = await this.save(family, table);
        if (saved === undefined) continue;
        const wanted = new Map(
          desired.filter((r) => r.table === table && familyOf(r.ip) === family).map((r) => [ruleKey(r), r]),
        );
        const seen = new Set<string>();
        // One listing per table, then only the changes: no "rule exists" check to get wrong (#568).
        for (const rule of ourSavedRules(saved)) {
          if (rule.key !== undefined && wanted.has(rule.key) && !seen.has(rule.key)) {
            seen.add(rule.key);
            continue;
          }
          await this.must('iptables', this.iptables(family), ['-w', '5', '-t', table, '-D', rule.chain, ...rule.args]);
          report.duplicatesRemoved++;
        }
        for (const [key, rule] of wanted) {
          if (seen.has(key)) continue;
          await this.must('iptables', this.iptables(family), [
            '-w',
            '5',
            '-t',
            table,
            '-I',
            rule.chain,
            '1',
            ...ruleArgs(rule),
          ]);
          report.rulesAdded++;
        }
      }
  }

  private async ensureNft(report: SyncReport): Promise<void> {
    const listed = await this.run('nft', ['list', 'table', 'inet', NFT_TABLE]);
    // The listing nft gave right after our last apply is what "intact" looks like.
    if (listed.code === 0 && this.nftApplied !== undefined && listed.stdout === this.nftApplied) return;
    const script = nftScript(this.config);
    await this.must('nft', 'nft', ['-f', '-'], script);
    const after = await this.must('nft', 'nft', ['list', 'table', 'inet', NFT_TABLE]);
    // Missing, or not as we left it (edited, or a killed instance's): the whole table was replaced.
    report.rulesAdded += desiredRules(this.config).length;
    this.nftApplied = after;
  }

  private noteError(report: SyncReport, error: unknown, fallback: SetupErrorType): void {
    const type = error instanceof NodeSetupError ? error.errortype : fallback;
    report.errors.push(type);
    this.log.error('node setup failed; trying again at the next sync', { errortype: type, err: error });
  }
}

function emptyReport(): SyncReport {
  return { interfaceAdded: false, addressesAdded: [], rulesAdded: 0, duplicatesRemoved: 0, errors: [] };
}

/** The families of these addresses, IPv4 first. */
export function localFamilies(ips: readonly string[]): Family[] {
  return ([4, 6] as const).filter((f) => ips.some((ip) => familyOf(ip) === f));
}

/**
 * Chooses the firewall for `auto`: iptables-legacy when the node's legacy tables of a family we
 * serve hold rules (its kube-proxy writes there, and an ACCEPT must sit beside its rules), else
 * native nft when `nft` works, else whatever `iptables` is.
 */
export async function detectFirewall(run: CommandRunner, localIps: readonly string[]): Promise<Firewall> {
  for (const family of localFamilies(localIps)) {
    const legacy = await run(family === 6 ? 'ip6tables-legacy-save' : 'iptables-legacy-save', []).catch(
      () => undefined,
    );
    if (legacy && legacy.code === 0 && /^-A /m.test(legacy.stdout)) return 'iptables-legacy';
  }
  const nft = await run('nft', ['list', 'tables']).catch(() => undefined);
  if (nft && nft.code === 0) return 'nft';
  return 'iptables';
}
