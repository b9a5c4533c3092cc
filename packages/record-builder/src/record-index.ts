import { type Fqdn, isInZone, parentOf, type Rr } from '@cluster-dns/wire';
import type { RecordSet } from './service-records.js';

/**
 * Every record of the served zones by owner name, with the names each Kubernetes object owns, so
 * an update replaces just that object's records. It also counts, for each name, how many names
 * with records lie below it: a name with descendants but no records is an empty non-terminal
 * (NODATA, RFC 8020), not NXDOMAIN.
 */
export class RecordIndex {
  private readonly names = new Map<Fqdn, Map<string, Rr[]>>();
  private readonly descendants = new Map<Fqdn, number>();
  private readonly owned = new Map<string, RecordSet>();
  private records = 0;

  constructor(private readonly zones: readonly Fqdn[]) {}

  get recordCount(): number {
    return this.records;
  }

  get nameCount(): number {
    return this.names.size;
  }

  /** Records at a name, from every owner. */
  lookup(name: Fqdn): Rr[] | undefined {
    const byOwner = this.names.get(name);
    if (!byOwner) return undefined;
    if (byOwner.size === 1) return byOwner.values().next().value;
    return [...byOwner.values()].flat();
  }

  /** True when the name has records or names with records below it. */
  exists(name: Fqdn): boolean {
    return this.names.has(name) || (this.descendants.get(name) ?? 0) > 0;
  }

  /** All names with records, for the /cache dump and zone transfers. */
  entries(): IterableIterator<[Fqdn, Map<string, Rr[]>]> {
    return this.names.entries();
  }

  /**
   * Replaces everything `owner` contributed with `next` (undefined removes it). Returns the names
   * whose records changed, so answers built from them can be dropped.
   */
  replace(owner: string, next: RecordSet | undefined): Fqdn[] {
    const previous = this.owned.get(owner);
    const changed: Fqdn[] = [];
    if (previous) {
      for (const [name, rrs] of previous) {
        if (next?.has(name)) continue;
        this.removeAt(name, owner, rrs.length);
        changed.push(name);
      }
    }
    if (next && next.size > 0) {
      for (const [name, rrs] of next) {
        const before = previous?.get(name);
        if (before && sameRecords(before, rrs)) continue;
        if (before) this.removeAt(name, owner, before.length);
        this.addAt(name, owner, rrs);
        changed.push(name);
      }
      this.owned.set(owner, next);
    } else {
      this.owned.delete(owner);
    }
    return changed;
  }

  private addAt(name: Fqdn, owner: string, rrs: Rr[]): void {
    let byOwner = this.names.get(name);
    if (!byOwner) {
      byOwner = new Map();
      this.names.set(name, byOwner);
      this.countAncestors(name, 1);
    }
    byOwner.set(owner, rrs);
    this.records += rrs.length;
  }

  private removeAt(name: Fqdn, owner: string, count: number): void {
    const byOwner = this.names.get(name);
    if (!byOwner?.delete(owner)) return;
    this.records -= count;
    if (byOwner.size === 0) {
      this.names.delete(name);
      this.countAncestors(name, -1);
    }
  }

  private countAncestors(name: Fqdn, delta: number): void {
    const zone = this.zones.find((z) => isInZone(name, z));
    if (!zone) return;
    let current = name;
    while (current !== zone) {
      current = parentOf(current);
      const n = (this.descendants.get(current) ?? 0) + delta;
      if (n <= 0) this.descendants.delete(current);
      else this.descendants.set(current, n);
    }
  }
}

function sameRecords(a: readonly Rr[], b: readonly Rr[]): boolean {
  if (a.length !== b.length) return false;
  return JSON.stringify(a) === JSON.stringify(b);
}
