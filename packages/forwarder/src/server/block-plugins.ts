import type { ScopedAcl } from '../plugins/acl/acl-rules.js';
import type { HostsTable } from '../plugins/hosts/hosts-table.js';
import type { ScopedRewrites } from '../plugins/rewrite/name-rewrite.js';

/**
 * What a configuration's server blocks give the plugins that read them per block (Corefile mode and
 * node-local mode; the kube-dns layout has none): read with the routes, applied with them.
 */
export interface BlockPlugins {
  readonly rewrites: readonly ScopedRewrites[];
  readonly hosts: readonly HostsTable[];
  /** `acl` blocks: who may ask what, by zone (plugins/acl). */
  readonly acls: readonly ScopedAcl[];
}

export const NO_BLOCK_PLUGINS: BlockPlugins = Object.freeze({ rewrites: [], hosts: [], acls: [] });
