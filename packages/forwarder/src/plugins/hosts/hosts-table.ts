import { isIP } from 'node:net';
import type { HostsConfig, HostsEntry } from '@cluster-dns/runtime';
import { canonicalIpv6, type Fqdn, isInZone, QCLASS, QTYPE, type Rr, reverseNameOf } from '@cluster-dns/wire';

/** One block's `hosts`, its zones filled in. */
export interface ScopedHosts extends Omit<HostsConfig, 'zones'> {
  readonly zones: readonly Fqdn[];
  /** The server block's keys: a name is looked up only in the table of the block that serves it. */
  readonly blockZones?: readonly Fqdn[];
}

/** What a hosts table says of a question: these records, the name with other types only, or nothing. */
export type HostsAnswer = { readonly records: readonly Rr[] } | 'nodata' | 'absent';

/**
 * A `hosts` plugin's table (coredns/coredns plugin/hosts): the inline entries and the file's, by
 * name for A and AAAA, by reverse name for PTR (unless no_reverse). Inline entries come first,
 * as CoreDNS reads them. Built once per file version; lookups allocate only the records answered.
 */
export class HostsTable {
  private readonly byName = new Map<Fqdn, { v4: string[]; v6: string[] }>();
  private readonly byReverse = new Map<Fqdn, Fqdn[]>();

  constructor(
    readonly config: ScopedHosts,
    entries: readonly HostsEntry[],
  ) {
    for (const { address: written, names } of [...config.inline, ...entries]) {
      // An IPv4-mapped IPv6 address is the IPv4 address, as Go's net.IP.To4 reads it.
      const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(written);
      const address = mapped ? (mapped[1] as string) : written;
      const v6 = isIP(address) === 6;
      const canonical = v6 ? canonicalIpv6(address) : address;
      for (const name of names) {
        const held = this.byName.get(name) ?? { v4: [], v6: [] };
        const list = v6 ? held.v6 : held.v4;
        if (!list.includes(canonical)) list.push(canonical);
        this.byName.set(name, held);
      }
      // Wildcard entries make no PTR records (CoreDNS's hosts README).
      const plain = names.filter((n) => !n.startsWith('*.'));
      if (!config.noReverse && plain.length) {
        const reverse = reverseNameOf(canonical);
        const held = this.byReverse.get(reverse) ?? [];
        for (const name of plain) if (!held.includes(name)) held.push(name);
        this.byReverse.set(reverse, held);
      }
    }
  }

  /** Whether the name is in this table's zones: only then is it asked. */
  covers(name: Fqdn): boolean {
    return this.config.zones.some((z) => isInZone(name, z));
  }

  /** Whether a name it has, asked for a type it cannot answer, goes on too (`fallthrough_unsupported`). */
  unsupportedFallsThrough(name: Fqdn): boolean {
    return this.config.fallthroughUnsupported && this.fallsThrough(name);
  }

  /** Whether a name it does not have goes on to the next stage (`fallthrough`); else SERVFAIL, as CoreDNS. */
  fallsThrough(name: Fqdn): boolean {
    const f = this.config.fallthrough;
    return f !== undefined && (f.length === 0 || f.some((z) => isInZone(name, z)));
  }

  lookup(name: Fqdn, qtype: number): HostsAnswer {
    const ttl = this.config.ttlSeconds;
    const ptrs = this.byReverse.get(name);
    if (ptrs) {
      if (qtype !== QTYPE.PTR) return 'nodata';
      return { records: ptrs.map((target) => ({ name, type: QTYPE.PTR, class: QCLASS.IN, ttl, target })) };
    }
    // `*.example.com` answers one label below example.com, when the name has no entry of its own.
    const held = this.byName.get(name) ?? this.byName.get(`*.${name.slice(name.indexOf('.') + 1)}` as Fqdn);
    if (!held) return 'absent';
    const addresses = qtype === QTYPE.A ? held.v4 : qtype === QTYPE.AAAA ? held.v6 : [];
    if (addresses.length === 0) return 'nodata';
    return {
      records: addresses.map((address) =>
        qtype === QTYPE.A
          ? { name, type: QTYPE.A, class: QCLASS.IN, ttl, address }
          : { name, type: QTYPE.AAAA, class: QCLASS.IN, ttl, address },
      ),
    };
  }
}
