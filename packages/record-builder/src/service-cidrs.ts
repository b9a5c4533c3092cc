import { type Cidr, type Fqdn, isInZone, parentOf, parseCidr, reverseZonesOf } from '@cluster-dns/wire';
import type { ServiceCidrInfo } from './cluster-model.js';

/**
 * The cluster's Service CIDRs and the reverse zones they make (each block cut where reverse names
 * can be cut: 10.96.0.0/12 is `96.10.in-addr.arpa.` … `111.10.in-addr.arpa.`). A name in one of
 * them is the cluster's to answer: an address there without a Service is NXDOMAIN with that
 * zone's SOA, which the forwarders keep rather than asking upstream (the PTR leak of
 * kubernetes/kubernetes#120585).
 */
export class ServiceCidrs {
  private readonly byName = new Map<string, readonly Cidr[]>();
  private zones = new Set<Fqdn>();

  /** Sets one object's blocks; false when nothing changed. Text that is no block is left out. */
  set(info: ServiceCidrInfo): boolean {
    const blocks = info.cidrs.map(parseCidr).filter((c): c is Cidr => c !== undefined);
    const before = this.byName.get(info.name);
    if (before && sameBlocks(before, blocks)) return false;
    this.byName.set(info.name, blocks);
    this.rebuild();
    return true;
  }

  delete(name: string): boolean {
    if (!this.byName.delete(name)) return false;
    this.rebuild();
    return true;
  }

  get size(): number {
    return this.byName.size;
  }

  names(): string[] {
    return [...this.byName.keys()];
  }

  /** The Service CIDR zone `name` is in (or is the apex of), inside `served`; undefined if none. */
  zoneOf(name: Fqdn, served: Fqdn): Fqdn | undefined {
    if (this.zones.size === 0) return undefined;
    for (let at = name; at !== served && isInZone(at, served); at = parentOf(at)) if (this.zones.has(at)) return at;
    return undefined;
  }

  private rebuild(): void {
    this.zones = new Set([...this.byName.values()].flat().flatMap(reverseZonesOf));
  }
}

const sameBlocks = (a: readonly Cidr[], b: readonly Cidr[]) =>
  a.length === b.length &&
  a.every((c, i) => c.family === b[i]?.family && c.base === b[i]?.base && c.bits === b[i]?.bits);
