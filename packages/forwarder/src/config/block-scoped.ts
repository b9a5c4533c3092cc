import { closestBlock, type Fqdn } from '@cluster-dns/wire';

/**
 * A plugin's setting in one server block: the block's zones (or the plugin's own), and the value.
 * A name takes the setting of the block with its longest zone, as CoreDNS picks a block.
 */
export interface BlockScoped<T> {
  readonly zones: readonly Fqdn[];
  readonly value: T;
}

/** The value for `name` among `scoped`, or undefined when no block of them serves it. */
export function scopedValue<T>(scoped: readonly BlockScoped<T>[], name: Fqdn): T | undefined {
  return scoped.length === 0 ? undefined : closestBlock(scoped, name)?.value;
}
