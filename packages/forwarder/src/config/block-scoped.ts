import { closestBlock, type Fqdn } from '@cluster-dns/wire';

/**
 * A plugin's setting in one server block: the block's zones (or the plugin's own), and the value.
 * A name takes the setting of the block with its longest zone, as CoreDNS picks a block.
 */
export interface BlockScoped<T> {
  readonly zones: readonly Fqdn[];
  /** Undefined for a block that does not name the plugin: a name it serves gets none. */
  readonly value: T | undefined;
}

/**
 * The value for `name`: the setting of the block that serves it (its longest key, among every
 * block), or undefined when that block has none. A list with no value at all is empty (a plugin no
 * block names costs a stage nothing).
 */
export function scopedValue<T>(scoped: readonly BlockScoped<T>[], name: Fqdn): T | undefined {
  return scoped.length === 0 ? undefined : closestBlock(scoped, name)?.value;
}
