import type { Fqdn } from '@cluster-dns/wire';
import type { DirectiveArgs } from '../args.js';

/** `file DBFILE [ZONES...] { reload DURATION; fallthrough [ZONES] }` (coredns/coredns plugin/file). */
export interface FileConfig {
  /** The zone file, as written (relative names are read from `root`, or the Corefile's folder). */
  readonly file: string;
  /** The zones it is read for; undefined: the block's. */
  readonly zones: readonly Fqdn[] | undefined;
  /** How often the file is read again (a changed SOA serial is applied); 0: never. 1 m by default. */
  readonly reloadMs: number;
  readonly fallthrough: readonly Fqdn[] | undefined;
  readonly line: number;
}

export function setupFile(a: DirectiveArgs): FileConfig {
  const [file, ...zoneArgs] = a.directive.args;
  if (file === undefined) a.fail('expected file DBFILE [ZONES...]');
  let reloadMs = 60_000;
  let fallthrough: Fqdn[] | undefined;
  for (const d of a.directive.block ?? []) {
    const s: DirectiveArgs = a.sub(d);
    if (d.name === 'reload') {
      if (d.args.length < 1) s.fail('reload duration value is expected');
      reloadMs = s.durationMs(d.args[0], 'DURATION');
    } else if (d.name === 'fallthrough') fallthrough = s.zones(d.args);
    else if (d.name === 'reload_by_mtime') {
      // Ours compares the serial each reload: a changed file without a new serial is not applied either way.
    } else if (d.name === 'upstream') {
      // Read and dropped, as CoreDNS does since 1.7: out-of-zone CNAME targets go through the chain.
    } else s.fail(`unknown property '${d.name}'`);
  }
  return {
    file,
    zones: zoneArgs.length ? a.zones(zoneArgs) : undefined,
    reloadMs,
    fallthrough,
    line: a.directive.line,
  };
}
