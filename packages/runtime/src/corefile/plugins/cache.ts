import { type Fqdn, ROOT } from '@cluster-dns/wire';
import type { DirectiveArgs } from '../args.js';

/** One kind of the cache (success: positive answers; denial: NXDOMAIN and NODATA). */
export interface CacheKind {
  readonly capacity: number;
  readonly maxTtlSeconds: number;
  readonly minTtlSeconds: number;
}

/** `cache` (coredns/coredns plugin/cache), the options we take. */
export interface CacheConfig {
  /** The zones it caches; undefined: the block's. */
  readonly zones: readonly Fqdn[] | undefined;
  readonly success: CacheKind;
  readonly denial: CacheKind;
  /** `prefetch AMOUNT [DURATION] [PERCENTAGE%]`: hits within DURATION that make an entry refreshed early. */
  readonly prefetch: { readonly amount: number; readonly durationMs: number; readonly percentage: number } | undefined;
  /** `serve_stale [DURATION] [immediate|verify]`: how long past its TTL an answer may be served. */
  readonly serveStale: { readonly durationMs: number; readonly verify: boolean } | undefined;
  /** `disable success|denial [ZONES]`: kinds not cached in these zones. */
  readonly disable: { readonly success: readonly Fqdn[]; readonly denial: readonly Fqdn[] };
  readonly line: number;
}

/** CoreDNS's cache: 256 shards of 39 entries per kind; 5 s floor; 3600 s / 1800 s ceilings. */
export const CACHE_DEFAULTS = { capacity: 9984, minTtlSeconds: 5, successTtl: 3600, denialTtl: 1800 } as const;

export function setupCache(a: DirectiveArgs): CacheConfig {
  const [ttlArg, ...zoneArgs] = a.directive.args;
  const ttl = ttlArg === undefined ? undefined : a.integer(ttlArg, 'TTL', 1);
  const kind = (max: number): CacheKind => ({
    capacity: CACHE_DEFAULTS.capacity,
    maxTtlSeconds: ttl ?? max,
    minTtlSeconds: CACHE_DEFAULTS.minTtlSeconds,
  });
  let success = kind(CACHE_DEFAULTS.successTtl);
  let denial = kind(CACHE_DEFAULTS.denialTtl);
  let prefetch: CacheConfig['prefetch'];
  let serveStale: CacheConfig['serveStale'];
  const disable = { success: [] as Fqdn[], denial: [] as Fqdn[] };
  for (const d of a.directive.block ?? []) {
    const s: DirectiveArgs = a.sub(d);
    switch (d.name) {
      case 'success':
      case 'denial': {
        const [capacity, max, min] = s.count(1, 3, `${d.name} CAPACITY [TTL [MINTTL]]`);
        const before = d.name === 'success' ? success : denial;
        const cap = s.integer(capacity, 'CAPACITY', 0);
        // A kind with room for nothing is not cached (issue coredns#5028's `denial 0`).
        if (cap === 0) disable[d.name].push(ROOT);
        const next = {
          capacity: cap,
          maxTtlSeconds: max === undefined ? before.maxTtlSeconds : s.integer(max, 'TTL', 1),
          minTtlSeconds: min === undefined ? before.minTtlSeconds : s.integer(min, 'MINTTL'),
        };
        if (d.name === 'success') success = next;
        else denial = next;
        break;
      }
      case 'prefetch': {
        const [amount, ...rest] = s.count(1, 3, 'prefetch AMOUNT [DURATION] [PERCENTAGE%]');
        let durationMs = 60_000;
        let percentage = 10;
        for (const r of rest) {
          if (r.endsWith('%')) percentage = s.integer(r.slice(0, -1), 'PERCENTAGE', 0, 100);
          else durationMs = s.durationMs(r, 'DURATION');
        }
        prefetch = { amount: s.integer(amount, 'AMOUNT', 1), durationMs, percentage };
        break;
      }
      case 'serve_stale': {
        const [duration, mode] = s.count(0, 2, 'serve_stale [DURATION] [immediate|verify]');
        if (mode !== undefined && mode !== 'immediate' && mode !== 'verify')
          s.fail(`REFRESH_MODE must be immediate or verify, got ${JSON.stringify(mode)}`);
        serveStale = {
          durationMs: duration === undefined ? 3_600_000 : s.durationMs(duration, 'DURATION'),
          verify: mode === 'verify',
        };
        break;
      }
      case 'disable': {
        const [raw, ...zones] = s.count(1, 64, 'disable success|denial [ZONES...]');
        const which = s.oneOf(raw, ['success', 'denial'] as const, 'what is disabled');
        disable[which].push(...(zones.length ? s.zones(zones) : s.zones(['.'])));
        break;
      }
      case 'servfail': {
        const [duration] = s.count(1, 1, 'servfail DURATION');
        const ms = s.durationMs(duration, 'DURATION');
        if (ms > 300_000) s.fail('DURATION must be 5m or less');
        if (ms > 0)
          s.warn(
            'SERVFAIL answers are not cached here: each is asked again (the forward’s health checks keep a dead server from being asked first)',
          );
        break;
      }
      case 'keepttl':
        s.count(0, 0, 'keepttl');
        s.warn(
          'accepted and ignored: cached answers count their TTL down, as the record-builder’s pushes keep them fresh',
        );
        break;
      default:
        s.fail(
          `"${d.name}" is not supported (success, denial, prefetch, serve_stale, disable, servfail and keepttl are)`,
        );
    }
  }
  return {
    zones: zoneArgs.length ? a.zones(zoneArgs) : undefined,
    success,
    denial,
    prefetch,
    serveStale,
    disable,
    line: a.directive.line,
  };
}
