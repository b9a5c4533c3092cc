import { createHash } from 'node:crypto';
import { type HostPort, readConfigDir } from '@cluster-dns/runtime';
import { readResolvConf } from './resolv-conf.js';

export interface RawConfig {
  /** Hash of everything read: an unchanged hash means nothing to apply (or to complain about again). */
  readonly version: string;
  readonly data: ReadonlyMap<string, string>;
  readonly resolvConf: readonly HostPort[];
}

/** Reads the ConfigMap folder (as dnsmasq-nanny does: one file per key) and the resolv file. */
export async function readConfigSources(configDir: string, resolvFile: string | undefined): Promise<RawConfig> {
  const data = configDir ? await readConfigDir(configDir) : new Map<string, string>();
  const resolvConf = await readResolvConf(resolvFile);
  const hash = createHash('sha256');
  for (const [k, v] of data) hash.update(`${k}\0${v}\0`);
  hash.update(JSON.stringify(resolvConf));
  return { version: hash.digest('hex').slice(0, 16), data, resolvConf };
}
