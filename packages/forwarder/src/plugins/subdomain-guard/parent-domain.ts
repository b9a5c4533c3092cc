import type { Buffer } from 'node:buffer';
import {
  type Fqdn,
  isInZone,
  labelsOf,
  parentOf,
  QTYPE,
  ROOT,
  readName,
  type ScannedResponse,
  toFqdn,
} from '@cluster-dns/wire';

// Which domain a random-subdomain flood is aimed at: the zone a name's misses are counted under.
// The zone cut where one is known (the owner of the SOA in a negative answer), else the
// registrable domain: the last two labels, or three under a two-letter country code whose second
// level is a public one (co.uk, com.au). No public-suffix list ships here: a name the heuristic
// groups too finely only makes the guard slower to trip, never trip on the wrong domain.

const PUBLIC_SECOND_LEVEL = new Set(['ac', 'co', 'com', 'edu', 'gov', 'net', 'or', 'org', 'ne', 'go', 'gv']);

/** The registrable domain of `name`: the shortest suffix a registrant could own. */
export function registrableDomainOf(name: Fqdn): Fqdn {
  const labels = labelsOf(name);
  const n = labels.length;
  if (n <= 2) return name;
  const tld = labels[n - 1] as string;
  const second = labels[n - 2] as string;
  const keep = tld.length === 2 && PUBLIC_SECOND_LEVEL.has(second) ? 3 : 2;
  return toFqdn(labels.slice(n - keep).join('.'));
}

/** Zone cuts learnt from answers, bounded: the eighth learnt first is forgotten when full. */
export class ZoneCuts {
  private readonly cuts = new Set<Fqdn>();

  constructor(private readonly max = 10_000) {}

  /** Notes the owner of the SOA in a reply's authority section: the apex of the zone that answered. */
  learn(wire: Buffer, scanned: ScannedResponse): void {
    for (const r of scanned.records) {
      if (r.section !== 'authority' || r.type !== QTYPE.SOA) continue;
      const apex = toFqdn(readName(wire, r.start).name);
      if (apex === ROOT || this.cuts.has(apex)) return;
      if (this.cuts.size >= this.max) {
        let n = this.max >> 3;
        for (const cut of this.cuts) {
          this.cuts.delete(cut);
          if (--n <= 0) break;
        }
      }
      this.cuts.add(apex);
      return;
    }
  }

  /**
   * The domain `name`'s misses count under, for a name routed to `routeDomain`: for the default
   * upstreams its registrable domain, for a stub domain the stub domain (a zone of its own); or,
   * below either, the longest known cut above the name. A cut higher up (a TLD) is never taken:
   * it would lump every domain under it together.
   */
  parentOf(name: Fqdn, routeDomain: Fqdn): Fqdn {
    const bottom = routeDomain === ROOT ? registrableDomainOf(name) : routeDomain;
    for (let current = name; current !== bottom && current !== ROOT; ) {
      current = parentOf(current);
      if (current !== bottom && this.cuts.has(current) && isInZone(current, bottom)) return current;
    }
    return bottom;
  }
}
