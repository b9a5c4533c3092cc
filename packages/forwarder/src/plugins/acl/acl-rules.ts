import type { AclConfig, AclRule } from '@cluster-dns/runtime';
import { type Fqdn, toFqdn } from '@cluster-dns/wire';

// A Corefile acl's rules by zone, as the route table holds them beside rewrite's and hosts':
// data, apart from the stage (acl-stage.ts) that applies them.

/** An `acl` block's rules and the zones they cover. */
export interface ScopedAcl {
  readonly zones: readonly Fqdn[];
  readonly rules: readonly AclRule[];
  /** The server block's own zones (its keys): a name goes to one block, whose acls alone judge it. */
  readonly blockZones: readonly Fqdn[];
  /** --acl's rules: every name's, before any block's. */
  readonly flags?: true;
}

/** A block's `acl` as the stage takes it: its own zones, or the block's. */
export function scopedAcl(acl: AclConfig, blockZones: readonly Fqdn[]): ScopedAcl {
  return { zones: acl.zones.length ? acl.zones.map((z) => toFqdn(z)) : blockZones, rules: acl.rules, blockZones };
}
