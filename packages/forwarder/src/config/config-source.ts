import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { type HostPort, readConfigDir } from '@cluster-dns/runtime';
import { readResolvConf } from './resolv-conf.js';

export interface RawConfig {
  /** Hash of everything read: an unchanged hash means nothing to apply (or to complain about again). */
  readonly version: string;
  readonly data: ReadonlyMap<string, string>;
  readonly resolvConf: readonly HostPort[];
  /** Other files read whole, by path (node-local mode's Corefile). */
  readonly files?: ReadonlyMap<string, string>;
}

/** Reads the ConfigMap folder (as dnsmasq-nanny does: one file per key), the resolv file, and any other files named. */
export async function readConfigSources(
  configDir: string,
  resolvFile: string | undefined,
  filePaths: readonly string[] = [],
  /** What else the version depends on (a Corefile's imports: runtime's importsFingerprint). */
  more?: (files: ReadonlyMap<string, string>) => string,
): Promise<RawConfig> {
  const data = configDir ? await readConfigDir(configDir) : new Map<string, string>();
  const resolvConf = await readResolvConf(resolvFile);
  const files = new Map<string, string>();
  const missing: string[] = [];
  for (const path of filePaths) {
    try {
      files.set(path, await readFile(path, 'utf8'));
    } catch (error) {
      // A file that is not there (yet) is one the config lacks, not a config that cannot be read:
      // a hosts file CoreDNS warns of and serves without; the Corefile itself then does not parse.
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      missing.push(path);
    }
  }
  const hash = createHash('sha256');
  for (const [k, v] of data) hash.update(`${k}\0${v}\0`);
  for (const [k, v] of files) hash.update(`file ${k}\0${v}\0`);
  for (const k of missing) hash.update(`missing ${k}\0`);
  hash.update(JSON.stringify(resolvConf));
  if (more) hash.update(`more\0${more(files)}`);
  return { version: hash.digest('hex').slice(0, 16), data, resolvConf, files };
}
