import { type Fqdn, isInZone, parentOf, type Rr } from '@cluster-dns/wire';
import type { RecordSet } from './service-records.js';

/**
 * Every record of the served zones by owner name, with the names each Kubernetes object owns, so
 * an update replaces just that object's records. It also counts, for each name, how many names
 * with records lie below it: a name with descendants but no records is an empty non-terminal
 * (NODATA, RFC 8020), not NXDOMAIN.
 */
/**
 * Records at one name: almost always from one owner, so that case is a pair, not a Map (a Map per
 * name was a third of the heap at 100,000 endpoints). A second owner (two Services sharing an IP's
 * PTR) turns it into a Map.
 */
type NameEntry = { readonly owner: string; readonly rrs: Rr[] } | Map<string, Rr[]>;

export class RecordIndex {
  private readonly names = new Map<Fqdn, NameEntry>();
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
    const entry = this.names.get(name);
    if (!entry) return undefined;
    if (!(entry instanceof Map)) return entry.rrs;
    return [...entry.values()].flat();
  }

  /** True when the name has records or names with records below it. */
  exists(name: Fqdn): boolean {
    return this.names.has(name) || (this.descendants.get(name) ?? 0) > 0;
  }

  /** All names with records and who owns them, for the /cache dump and zone transfers. */
  *entries(): IterableIterator<[Fqdn, ReadonlyMap<string, Rr[]>]> {
    for (const [name, entry] of this.names) {
      yield [name, entry instanceof Map ? entry : new Map([[entry.owner, entry.rrs]])];
    }
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
        if (before) this.swapAt(name, owner, before.length, rrs);
        else this.addAt(name, owner, rrs);
        changed.push(name);
      }
      this.owned.set(owner, next);
    } else {
      this.owned.delete(owner);
    }
    return changed;
  }

  private addAt(name: Fqdn, owner: string, rrs: Rr[]): void {
    const entry = this.names.get(name);
    if (!entry) {
      this.names.set(name, { owner, rrs });
      this.countAncestors(name, 1);
    } else if (entry instanceof Map) {
      entry.set(owner, rrs);
    } else if (entry.owner === owner) {
      this.names.set(name, { owner, rrs });
    } else {
      this.names.set(
        name,
        new Map([
          [entry.owner, entry.rrs],
          [owner, rrs],
        ]),
      );
    }
    this.records += rrs.length;
  }

  /** New records for a name the owner already had: the name stays, so its ancestors do not change. */
  private swapAt(name: Fqdn, owner: string, count: number, rrs: Rr[]): void {
    const entry = this.names.get(name);
    if (entry instanceof Map) entry.set(owner, rrs);
    else this.names.set(name, { owner, rrs });
    this.records += rrs.length - count;
  }

  private removeAt(name: Fqdn, owner: string, count: number): void {
    const entry = this.names.get(name);
    if (!entry) return;
    if (entry instanceof Map) {
      if (!entry.delete(owner)) return;
      if (entry.size === 1) {
        const [[other, rrs]] = [...entry] as [[string, Rr[]]];
        this.names.set(name, { owner: other, rrs });
      }
    } else {
      if (entry.owner !== owner) return;
      this.names.delete(name);
      this.countAncestors(name, -1);
    }
    this.records -= count;
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

/** Field by field: called for every name of a rebuilt Service, so no serialising here. */
function sameRecords(a: readonly Rr[], b: readonly Rr[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    const x = a[i] as Rr;
    const y = b[i] as Rr;
    if (x === y) continue;
    if (
      x.type !== y.type ||
      x.ttl !== y.ttl ||
      x.address !== y.address ||
      x.target !== y.target ||
      x.port !== y.port ||
      x.weight !== y.weight ||
      x.priority !== y.priority ||
      x.text?.join('\0') !== y.text?.join('\0')
    ) {
      return false;
    }
  }
  return true;
}
