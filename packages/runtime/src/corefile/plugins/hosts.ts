import { isIP } from 'node:net';
import { type Fqdn, isValidName, toFqdn } from '@cluster-dns/wire';
import type { DirectiveArgs } from '../args.js';

/** One hosts line: an address and the names it answers for. */
export interface HostsEntry {
  readonly address: string;
  readonly names: readonly Fqdn[];
}

/** `hosts` (coredns/coredns plugin/hosts), the options we take. */
export interface HostsConfig {
  /** The hosts file read (and read again every `reloadMs`): /etc/hosts unless named, as CoreDNS. */
  readonly file: string;
  /** The zones it answers for; undefined: the block's. */
  readonly zones: readonly Fqdn[] | undefined;
  readonly inline: readonly HostsEntry[];
  readonly ttlSeconds: number;
  /** No PTR records from the entries. */
  readonly noReverse: boolean;
  /** How often the file is read again; 0: never. */
  readonly reloadMs: number;
  /** As kubernetes's: names not found go on in these zones ([] = all); undefined: SERVFAIL, as CoreDNS. */
  readonly fallthrough: readonly Fqdn[] | undefined;
  /** `fallthrough_unsupported`: a name it has, asked for a type other than A, AAAA, PTR, goes on too. */
  readonly fallthroughUnsupported: boolean;
  readonly line: number;
}

/** Reads the lines of a hosts file (or inline block): `address name...`, `#` comments. Bad lines are skipped. */
export function parseHostsText(text: string): HostsEntry[] {
  const out: HostsEntry[] = [];
  for (const raw of text.split('\n')) {
    const [address, ...names] = (raw.split('#')[0] as string).trim().split(/\s+/);
    if (!address || isIP(address.replace(/%.*$/, '')) === 0) continue;
    const valid = names.filter((n) => n !== '' && isValidName(n)).map((n) => toFqdn(n.toLowerCase()));
    if (valid.length) out.push({ address: address.replace(/%.*$/, ''), names: valid });
  }
  return out;
}

export function setupHosts(a: DirectiveArgs): HostsConfig {
  const [fileArg, ...zoneArgs] = a.directive.args;
  let ttlSeconds = 3600;
  let noReverse = false;
  let reloadMs = 5000;
  let fallthrough: Fqdn[] | undefined;
  let fallthroughUnsupported = false;
  const inline: HostsEntry[] = [];
  for (const d of a.directive.block ?? []) {
    const s = a.sub(d);
    // Inline entries come before the options (CoreDNS reads one after fallthrough as an unknown property).
    if (isIP(d.name.replace(/%.*$/, '')) !== 0 && fallthrough === undefined) {
      // An inline entry: the address reads as the directive's name.
      const names = d.args.map((n) => {
        if (!isValidName(n)) s.fail(`${JSON.stringify(n)} is not a host name`);
        return toFqdn(n.toLowerCase());
      });
      if (names.length === 0) s.fail('an inline entry needs at least one name after the address');
      inline.push({ address: d.name, names });
      continue;
    }
    switch (d.name) {
      case 'ttl':
        ttlSeconds = s.integer(s.count(1, 1, 'ttl SECONDS')[0], 'SECONDS', 0, 2_147_483_647);
        break;
      case 'no_reverse':
        s.count(0, 0, 'no_reverse');
        noReverse = true;
        break;
      case 'reload':
        reloadMs = s.durationMs(s.count(1, 1, 'reload DURATION')[0], 'DURATION');
        break;
      case 'fallthrough':
        fallthrough = s.zones(d.args);
        break;
      case 'fallthrough_unsupported':
        s.count(0, 0, 'fallthrough_unsupported');
        fallthroughUnsupported = true;
        break;
      default:
        s.fail(`unknown property '${d.name}'`);
    }
  }
  if (fallthroughUnsupported && fallthrough === undefined) a.fail('fallthrough_unsupported requires fallthrough');
  return {
    file: fileArg ?? '/etc/hosts',
    zones: zoneArgs.length ? a.zones(zoneArgs) : undefined,
    inline,
    ttlSeconds,
    noReverse,
    reloadMs,
    fallthrough,
    fallthroughUnsupported,
    line: a.directive.line,
  };
}
