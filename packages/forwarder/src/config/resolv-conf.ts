import { readFile } from 'node:fs/promises';
import { isIP } from 'node:net';
import type { HostPort } from '@cluster-dns/runtime';

/** `nameserver` lines of a resolv.conf; IPv6 link-local zone ids dropped, port always 53. */
export function parseResolvConf(text: string): HostPort[] {
  const out: HostPort[] = [];
  for (const line of text.split('\n')) {
    const m = /^\s*nameserver\s+(\S+)/.exec(line);
    const host = m?.[1]?.replace(/%.*$/, '');
    if (host && isIP(host)) out.push({ host, port: 53 });
  }
  return out;
}

/** Reads it; a missing file means no nameservers (dnsmasq then has only --server upstreams). */
export async function readResolvConf(path: string | undefined): Promise<HostPort[]> {
  if (!path) return [];
  try {
    return parseResolvConf(await readFile(path, 'utf8'));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
}
