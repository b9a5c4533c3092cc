import { readdir, readFile, realpath } from 'node:fs/promises';
import { join } from 'node:path';
import { isDns1123Subdomain } from '@cluster-dns/wire';
import { ClusterDnsError } from './errors.js';
import { type HostPort, parseHostPort } from './host-port.js';

/**
 * The per-client limits of the forwarder (its --client-* and --rrl-* flags), as numbers: a rate of
 * 0 turns that limit off.
 */
export interface ClientLimits {
  /** Queries a second each client address may send over UDP, and how many it may save up. */
  readonly qps: number;
  readonly burst: number;
  /** The same over TCP, where the address is proven and node caches send their misses. */
  readonly tcpQps: number;
  readonly tcpBurst: number;
  /** Over its rate, every `slip`-th UDP query gets TC (ask again over TCP), the others REFUSED; 0 = REFUSED only. */
  readonly slip: number;
  /** Identical answers of `rrlMinBytes` or more a second to one address (response rate limiting). */
  readonly rrlResponsesPerSecond: number;
  readonly rrlMinBytes: number;
  /** Over it, every `rrlSlip`-th such answer is sent as TC, the others dropped; 0 = dropped only. */
  readonly rrlSlip: number;
}

/** The names `clientLimits` may hold, each a whole number at least this. */
const CLIENT_LIMIT_MINIMA: Readonly<Record<keyof ClientLimits, number>> = {
  qps: 0,
  burst: 1,
  tcpQps: 0,
  tcpBurst: 1,
  slip: 0,
  rrlResponsesPerSecond: 0,
  rrlMinBytes: 0,
  rrlSlip: 0,
};

/** The kube-dns ConfigMap (`kube-system/kube-dns`), validated as kube-dns validates it. */
export interface KubeDnsConfig {
  /** Domain (canonical, no trailing dot) → its nameservers. */
  readonly stubDomains: ReadonlyMap<string, readonly HostPort[]>;
  /** At most 3; empty means use resolv.conf. */
  readonly upstreamNameservers: readonly HostPort[];
  /** Deprecated federation names; kept only to warn that they are unsupported. */
  readonly federations: string | undefined;
  /**
   * Ours, not kube-dns's: `clientLimits`, a JSON object of ClientLimits fields that override the
   * forwarder's flags while the key is there (`{"qps": 500}`). Empty when absent.
   */
  readonly clientLimits: Readonly<Partial<ClientLimits>>;
}

export class ConfigError extends ClusterDnsError {
  constructor(key: string, message: string) {
    super('CONFIG_INVALID', `config key ${key}: ${message}`, { hint: 'the last good configuration stays in use' });
  }
}

export const EMPTY_KUBE_DNS_CONFIG: KubeDnsConfig = Object.freeze({
  stubDomains: new Map(),
  upstreamNameservers: [],
  federations: undefined,
  clientLimits: Object.freeze({}),
});

/**
 * Reads a ConfigMap volume: one file per key. A missing or empty folder is the default config, as
 * in kube-dns. The kubelet updates such a volume by writing the new version into a folder of its
 * own and swapping the `..data` symlink to it; only then does it add the links of new keys and
 * remove those of old ones. Read through the visible links, an update in progress can look like a
 * config nobody wrote (a new key not linked yet, an old one dangling). So when `..data` is there,
 * the version it points to is read whole, and read again should the kubelet remove it meanwhile.
 */
export async function readConfigDir(dir: string): Promise<Map<string, string>> {
  for (let attempt = 1; ; attempt++) {
    let version: string;
    try {
      version = await realpath(join(dir, '..data'));
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== 'ENOENT' && code !== 'ENOTDIR') throw error;
      return readKeyFiles(dir, false);
    }
    try {
      return await readKeyFiles(version, true);
    } catch (error) {
      // The version was replaced and removed while being read: the next one is complete.
      if (!(error instanceof VersionGoneError) || attempt >= 3) throw error;
    }
  }
}

class VersionGoneError extends Error {}

/** Each regular file of `dir` whose name is not hidden, by name. */
async function readKeyFiles(dir: string, isVersion: boolean): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    if (isVersion) throw new VersionGoneError(dir);
    return out;
  }
  for (const name of names.sort()) {
    if (name.startsWith('.')) continue;
    try {
      out.set(name, await readFile(join(dir, name), 'utf8'));
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'EISDIR') continue;
      if (code !== 'ENOENT') throw error;
      if (isVersion) throw new VersionGoneError(dir);
      // A visible key whose link dangles or went away between readdir and read: not a config value.
    }
  }
  return out;
}

/** Validates ConfigMap data; throws ConfigError naming the key and the problem. Unknown keys are ignored. */
export function parseKubeDnsConfig(data: ReadonlyMap<string, string>): KubeDnsConfig {
  const stubDomains = new Map<string, HostPort[]>();
  const stubText = data.get('stubDomains')?.trim();
  if (stubText) {
    const parsed = parseJsonValue('stubDomains', stubText);
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
      throw new ConfigError('stubDomains', 'expected a JSON object of domain → [nameserver, …]');
    }
    for (const [domain, servers] of Object.entries(parsed)) {
      // kube-dns takes keys that are DNS-1123 subdomains; case and a trailing dot are forgiven here,
      // since DNS names are case-insensitive and both spell the same domain.
      const key = domain.toLowerCase().replace(/\.$/, '');
      if (!isDns1123Subdomain(key))
        throw new ConfigError('stubDomains', `${JSON.stringify(domain)} is not a DNS-1123 subdomain`);
      if (!Array.isArray(servers) || servers.length === 0 || !servers.every((s) => typeof s === 'string')) {
        throw new ConfigError('stubDomains', `${domain}: expected a non-empty array of nameserver strings`);
      }
      stubDomains.set(
        key,
        servers.map((s) => toServer('stubDomains', s)),
      );
    }
  }
  let upstreamNameservers: HostPort[] = [];
  const upstreamText = data.get('upstreamNameservers')?.trim();
  if (upstreamText) {
    const parsed = parseJsonValue('upstreamNameservers', upstreamText);
    if (!Array.isArray(parsed) || !parsed.every((s) => typeof s === 'string')) {
      throw new ConfigError('upstreamNameservers', 'expected a JSON array of nameserver strings');
    }
    if (parsed.length > 3)
      throw new ConfigError('upstreamNameservers', `${parsed.length} entries; at most 3 are allowed`);
    upstreamNameservers = parsed.map((s) => toServer('upstreamNameservers', s));
  }
  return {
    stubDomains,
    upstreamNameservers,
    federations: data.get('federations')?.trim() || undefined,
    clientLimits: parseClientLimits(data.get('clientLimits')?.trim()),
  };
}

/** The `clientLimits` key: known names only, each a whole number at least its minimum. */
function parseClientLimits(text: string | undefined): Partial<ClientLimits> {
  if (!text) return {};
  const parsed = parseJsonValue('clientLimits', text);
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    throw new ConfigError('clientLimits', 'expected a JSON object such as {"qps": 2000, "burst": 500}');
  const out: Partial<Record<keyof ClientLimits, number>> = {};
  for (const [name, value] of Object.entries(parsed)) {
    if (!(name in CLIENT_LIMIT_MINIMA))
      throw new ConfigError(
        'clientLimits',
        `unknown limit ${JSON.stringify(name)} (known: ${Object.keys(CLIENT_LIMIT_MINIMA).join(', ')})`,
      );
    const minimum = CLIENT_LIMIT_MINIMA[name as keyof ClientLimits];
    if (typeof value !== 'number' || !Number.isInteger(value) || value < minimum || value > 10_000_000)
      throw new ConfigError(
        'clientLimits',
        `${name}: expected a whole number from ${minimum} to 10000000, got ${JSON.stringify(value)}`,
      );
    out[name as keyof ClientLimits] = value;
  }
  return out;
}

function parseJsonValue(key: string, text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new ConfigError(key, `not JSON: ${(error as Error).message}`);
  }
}

function toServer(key: string, text: string): HostPort {
  try {
    return parseHostPort(text, 53, key);
  } catch {
    throw new ConfigError(
      key,
      `${JSON.stringify(text)} is not an IP address with an optional port (hostnames are not resolved)`,
    );
  }
}
