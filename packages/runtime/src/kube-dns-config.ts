import { readdir, readFile, realpath } from 'node:fs/promises';
import { join } from 'node:path';
import { isDns1123Subdomain } from '@cluster-dns/wire';
import { ClusterDnsError } from './errors.js';
import { type HostPort, parseHostPort } from './host-port.js';

/** The kube-dns ConfigMap (`kube-system/kube-dns`), validated as kube-dns validates it. */
export interface KubeDnsConfig {
  /** Domain (canonical, no trailing dot) → its nameservers. */
  readonly stubDomains: ReadonlyMap<string, readonly HostPort[]>;
  /** At most 3; empty means use resolv.conf. */
  readonly upstreamNameservers: readonly HostPort[];
  /** Deprecated federation names; kept only to warn that they are unsupported. */
  readonly federations: string | undefined;
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
  return { stubDomains, upstreamNameservers, federations: data.get('federations')?.trim() || undefined };
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
