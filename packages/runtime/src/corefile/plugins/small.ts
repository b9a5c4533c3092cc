import { isIP } from 'node:net';
import type { DirectiveArgs } from '../args.js';

// The plugins of one line and no block: bufsize, chaos, any, root.

/** `bufsize [SIZE]`: the largest UDP reply a client with EDNS0 gets; 1232 (DNS flag day 2020) by default. */
export function setupBufsize(a: DirectiveArgs): number {
  a.noBlock();
  const [size] = a.count(0, 1, 'bufsize [SIZE]');
  return size === undefined ? 1232 : a.integer(size, 'SIZE', 512, 4096);
}

/** `chaos [VERSION] [AUTHORS...]`: version.bind, authors.bind, hostname.bind in class CH. */
export interface ChaosConfig {
  /** undefined: this stack's own version. */
  readonly version: string | undefined;
  /** undefined: this stack's own authors. */
  readonly authors: readonly string[] | undefined;
}

const trim255 = (s: string) => (s.length < 256 ? s : s.slice(0, 255));

export function setupChaos(a: DirectiveArgs): ChaosConfig {
  if (a.directive.block?.length) a.fail(`unknown property '${a.directive.block[0]?.name}'`);
  const [version, ...authors] = a.directive.args;
  return {
    version: version === undefined ? undefined : trim255(version),
    authors: authors.length ? [...new Set(authors.map(trim255))].sort() : undefined,
  };
}

/** `any`: ANY queries get RFC 8482's HINFO answer. */
export function setupAny(a: DirectiveArgs): true {
  a.noBlock();
  a.count(0, 0, 'any');
  return true;
}

/** `root PATH`: the folder relative file names (file, hosts, tls) are read from. */
export function setupRoot(a: DirectiveArgs): string {
  a.noBlock();
  return a.count(1, 1, 'root PATH')[0] as string;
}

/** `dns64 [PREFIX] { prefix PREFIX; translate_all; allow_ipv4 }` (RFC 6147). */
export interface Dns64Config {
  /** The /32 … /96 IPv6 prefix synthesized addresses are made in (RFC 6052); 64:ff9b::/96 by default. */
  readonly prefix: { readonly address: string; readonly bits: number };
  /** Synthesize even when an AAAA exists. */
  readonly translateAll: boolean;
  /** Synthesize for IPv4 clients too (by default only IPv6 clients get them). */
  readonly allowIpv4: boolean;
}

function prefixOf(a: DirectiveArgs, raw: string): Dns64Config['prefix'] {
  const m = /^([^/]+)\/(\d+)$/.exec(raw);
  if (!m || isIP(m[1] as string) === 0) a.fail(`invalid CIDR address: ${raw}`);
  if (isIP(m[1] as string) !== 6) a.fail(`invalid netmask 32 IPv6 address: ${JSON.stringify(raw)}`);
  const bits = Number(m[2]);
  if (bits > 128) a.fail(`invalid CIDR address: ${raw}`);
  if (bits % 8 !== 0 || bits < 32 || bits > 96) a.fail(`invalid prefix length ${JSON.stringify(raw)}`);
  return { address: m[1] as string, bits };
}

export function setupDns64(a: DirectiveArgs): Dns64Config {
  let prefix = { address: '64:ff9b::', bits: 96 };
  let translateAll = false;
  let allowIpv4 = false;
  const args = a.directive.args;
  if (args.length > 1) a.fail('expected dns64 [PREFIX]');
  if (args.length === 1) prefix = prefixOf(a, args[0] as string);
  for (const d of a.directive.block ?? []) {
    const s: DirectiveArgs = a.sub(d);
    if (d.name === 'prefix') prefix = prefixOf(s, s.count(1, 1, 'prefix PREFIX')[0] as string);
    else if (d.name === 'translate_all') translateAll = true;
    else if (d.name === 'allow_ipv4') allowIpv4 = true;
    else s.fail(`unknown property '${d.name}'`);
  }
  return { prefix, translateAll, allowIpv4 };
}
