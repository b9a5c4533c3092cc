/** How long answers are kept: the process's flags, or a node-local Corefile block's `cache`. */
export interface CachePolicy {
  negativeCache: boolean;
  negTtlSeconds: number;
  minCacheTtlSeconds: number;
  maxCacheTtlSeconds: number;
  /** A Corefile's `cache { disable success|denial ZONE }`: never cached here, pushed zone or not. */
  disable?: { readonly success: boolean; readonly denial: boolean };
}

/** A route's own cache policy (node-local mode's per-block `cache`), or 'off' for a block without one. */
export type RouteCache = CachePolicy | 'off';
