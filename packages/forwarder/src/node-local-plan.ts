import { isIP } from 'node:net';
import { type HostPort, parseGoDurationMs } from '@cluster-dns/runtime';
import { type Fqdn, isValidName, ROOT, toFqdn } from '@cluster-dns/wire';
import type { CachePolicy, RouteCache } from './cache-policy.js';
import { CorefileError, type Directive, type ServerBlock } from './corefile.js';
import type { ServerRule } from './server-flag.js';

/** Where one zone's queries go, and how its answers are cached. */
export interface ZonePlan {
  readonly zone: Fqdn;
  /** Servers, or the resolv file (`forward . /etc/resolv.conf`) whose nameservers are the servers. */
  readonly servers: readonly HostPort[] | { readonly resolvFile: string };
  readonly forceTcp: boolean;
  readonly cache: RouteCache;
  /** Entries this block's cache may hold (CoreDNS: success + denial capacity); 0 without `cache`. */
  readonly capacity: number;
}

/** A Corefile of nodelocaldns.yaml's shape, as the forwarder runs it. */
export interface NodeLocalPlan {
  readonly listenAddresses: readonly string[];
  readonly port: number;
  /** Every block but the root zone's, as `--server=/zone/` rules. */
  readonly rules: readonly ServerRule[];
  /** The `.` block; undefined when there is none (then names outside every zone are REFUSED). */
  readonly root: ZonePlan | undefined;
  /** Entries of the one cache: the largest block's capacity. */
  readonly cacheSize: number;
  /** `prometheus [ADDRESS]`: where the forwarder's /metrics listens. */
  readonly metrics: HostPort | undefined;
  /** `health [ADDRESS]`: where /health answers. */
  readonly health: HostPort | undefined;
  readonly lameduckMs: number | undefined;
  readonly logQueries: boolean;
  readonly loopDetect: boolean;
  readonly prefetchHits: number | undefined;
  /** `reload [INTERVAL]`: how often the Corefile is read again; undefined without `reload`. */
  readonly reloadMs: number | undefined;
  readonly forwardMax: number | undefined;
}

/** CoreDNS's cache: 256 shards of 39 entries per kind. */
const DEFAULT_CAPACITY = 9984;
const DEFAULT_MIN_TTL = 5;

function fail(d: { line: number }, message: string, source: string): never {
  throw new CorefileError(d.line, message, source);
}

function integer(d: Directive, raw: string | undefined, what: string, source: string, min = 0): number {
  if (raw === undefined || !/^\d+$/.test(raw) || Number(raw) < min)
    fail(d, `${d.name}: ${what} must be an integer of at least ${min}, got ${JSON.stringify(raw ?? '')}`, source);
  return Number(raw);
}

/** `host:port`, `:port`, `host` (with the plugin's default port); `dns://` allowed. */
function address(d: Directive, raw: string, defaultHost: string, defaultPort: number, source: string): HostPort {
  const text = raw.replace(/^dns:\/\//, '');
  const m = /^(?:\[([^\]]+)\]|([^:[\]]*))(?::(\d+))?$/.exec(text) ?? /^([0-9a-fA-F:]+)$/.exec(text);
  const host = (m?.[1] ?? m?.[2] ?? '') || defaultHost;
  const port = m?.[3] === undefined ? defaultPort : Number(m[3]);
  if (!m || isIP(host === 'localhost' ? '127.0.0.1' : host) === 0 || port < 1 || port > 65535)
    fail(d, `${d.name}: ${JSON.stringify(raw)} is not an IP address with an optional port`, source);
  return { host: host === 'localhost' ? '127.0.0.1' : host, port };
}

function parseKey(block: ServerBlock, key: string, source: string): { zone: Fqdn; port: number } {
  const m = /^(?:dns:\/\/)?([^:]+?)(?::(\d+))?$/.exec(key);
  const name = m?.[1] ?? '';
  if (!m || !(name === '.' || isValidName(name)))
    fail(
      block,
      `server block key ${JSON.stringify(key)} is not zone[:port] (only dns:// servers are supported)`,
      source,
    );
  return { zone: toFqdn(name), port: m[2] === undefined ? 53 : Number(m[2]) };
}

function parseCache(d: Directive, source: string): { cache: CachePolicy; capacity: number; prefetch?: number } {
  const ttlArg = d.args[0];
  if (d.args.length > 1) fail(d, 'cache: zones after the TTL are not supported (the block’s zones are cached)', source);
  const ttl = ttlArg === undefined ? undefined : integer(d, ttlArg, 'TTL', source, 1);
  let success = { capacity: DEFAULT_CAPACITY, ttl: ttl ?? 3600, min: DEFAULT_MIN_TTL };
  let denial = { capacity: DEFAULT_CAPACITY, ttl: ttl ?? 1800, min: DEFAULT_MIN_TTL };
  let prefetch: number | undefined;
  for (const sub of d.block ?? []) {
    if (sub.name === 'success' || sub.name === 'denial') {
      if (sub.args.length < 1 || sub.args.length > 3) fail(sub, `${sub.name} CAPACITY [TTL [MINTTL]]`, source);
      const previous = sub.name === 'success' ? success : denial;
      const next = {
        capacity: integer(sub, sub.args[0], 'CAPACITY', source, 1),
        ttl: sub.args[1] === undefined ? previous.ttl : integer(sub, sub.args[1], 'TTL', source, 1),
        min: sub.args[2] === undefined ? previous.min : integer(sub, sub.args[2], 'MINTTL', source),
      };
      if (sub.name === 'success') success = next;
      else denial = next;
    } else if (sub.name === 'prefetch') {
      // AMOUNT hits within a minute; when the entry is refreshed is ours (a tenth to a fifth of its TTL).
      prefetch = integer(sub, sub.args[0], 'AMOUNT', source, 1);
    } else fail(sub, `cache: "${sub.name}" is not supported (success, denial and prefetch are)`, source);
  }
  return {
    cache: {
      negativeCache: true,
      negTtlSeconds: denial.ttl,
      // One floor for both kinds: ours keeps one policy per route. CoreDNS's defaults are equal.
      minCacheTtlSeconds: Math.min(success.min, denial.min),
      maxCacheTtlSeconds: success.ttl,
    },
    capacity: success.capacity + denial.capacity,
    ...(prefetch === undefined ? {} : { prefetch }),
  };
}

function parseForward(
  d: Directive,
  zone: Fqdn,
  source: string,
): Pick<ZonePlan, 'servers' | 'forceTcp'> & { max?: number; line: number } {
  const [from, ...to] = d.args;
  if (from === undefined || to.length === 0) fail(d, 'forward FROM TO…', source);
  if (from !== '.' && toFqdn(from) !== zone)
    fail(d, `forward: FROM must be "." or the block's zone, got ${JSON.stringify(from)}`, source);
  let forceTcp = false;
  let max: number | undefined;
  for (const sub of d.block ?? []) {
    if (sub.name === 'force_tcp') forceTcp = true;
    else if (sub.name === 'prefer_udp') forceTcp = false;
    else if (sub.name === 'max_concurrent') max = integer(sub, sub.args[0], 'MAX', source, 1);
    else fail(sub, `forward: "${sub.name}" is not supported (force_tcp, prefer_udp and max_concurrent are)`, source);
  }
  const files = to.filter((t) => t.startsWith('/'));
  if (files.length > 0) {
    if (to.length > 1) fail(d, 'forward: a resolv.conf path must be the only destination', source);
    return {
      servers: { resolvFile: files[0] as string },
      forceTcp,
      line: d.line,
      ...(max === undefined ? {} : { max }),
    };
  }
  const servers = to.map((t) => address(d, t, '', 53, source));
  return { servers, forceTcp, line: d.line, ...(max === undefined ? {} : { max }) };
}

function sameAddress(a: HostPort | undefined, b: HostPort): boolean {
  return a === undefined || (a.host === b.host && a.port === b.port);
}

/**
 * Turns a rendered Corefile into the forwarder's plan. Every block must listen on the same
 * addresses and port (nodelocaldns.yaml's do), since the forwarder has one set of listeners and
 * routes each name by its longest zone. Anything outside the subset is an error naming its line.
 */
export function planNodeLocal(blocks: readonly ServerBlock[], source = 'Corefile'): NodeLocalPlan {
  let listen: { addresses: string[]; port: number; line: number } | undefined;
  let metrics: HostPort | undefined;
  let health: HostPort | undefined;
  let lameduckMs: number | undefined;
  let logQueries = false;
  let loopDetect = false;
  let prefetchHits: number | undefined;
  let reloadMs: number | undefined;
  let forwardMax: number | undefined;
  const zones: ZonePlan[] = [];
  for (const block of blocks) {
    const keys = block.keys.map((k) => parseKey(block, k, source));
    let binds: string[] = ['0.0.0.0'];
    let forward: ReturnType<typeof parseForward> | undefined;
    let cache: ReturnType<typeof parseCache> | undefined;
    for (const d of block.directives) {
      switch (d.name) {
        case 'errors':
          break;
        case 'reload':
          // CoreDNS's default interval; its jitter argument is accepted and not needed here.
          reloadMs = d.args[0] === undefined ? 30_000 : parseGoDurationMs(d.args[0], `line ${d.line}: reload`);
          break;
        case 'log':
          logQueries = true;
          break;
        case 'loop':
          loopDetect = true;
          break;
        case 'bind':
          if (d.args.length === 0) fail(d, 'bind needs at least one address', source);
          for (const a of d.args)
            if (isIP(a) === 0)
              fail(d, `bind: ${JSON.stringify(a)} is not an IP address (interface names are not supported)`, source);
          binds = [...new Set(d.args)];
          break;
        case 'cache':
          if (cache) fail(d, 'cache is given twice in this block', source);
          cache = parseCache(d, source);
          if (cache.prefetch !== undefined) prefetchHits = cache.prefetch;
          break;
        case 'forward':
          if (forward) fail(d, 'forward is given twice in this block', source);
          forward = parseForward(d, keys[0]?.zone ?? ROOT, source);
          if (forward.max !== undefined) forwardMax = Math.max(forwardMax ?? 0, forward.max);
          break;
        case 'prometheus': {
          const at = address(d, d.args[0] ?? 'localhost:9153', '0.0.0.0', 9153, source);
          if (!sameAddress(metrics, at)) fail(d, 'prometheus: every block must use the same address', source);
          metrics = at;
          break;
        }
        case 'health': {
          const at = address(d, d.args[0] ?? ':8080', '0.0.0.0', 8080, source);
          if (!sameAddress(health, at)) fail(d, 'health: every block must use the same address', source);
          health = at;
          for (const sub of d.block ?? []) {
            if (sub.name !== 'lameduck' || sub.args[0] === undefined)
              fail(sub, 'health: only "lameduck DURATION" is supported', source);
            lameduckMs = parseGoDurationMs(sub.args[0], 'lameduck');
          }
          break;
        }
        default:
          fail(d, `plugin "${d.name}" is not supported in node-local mode`, source);
      }
    }
    if (!forward) fail(block, `server block "${block.keys.join(' ')}" has no forward`, source);
    for (const { zone, port } of keys) {
      if (listen === undefined) listen = { addresses: binds, port, line: block.line };
      else if (listen.port !== port || listen.addresses.join(' ') !== binds.join(' '))
        fail(
          block,
          `every server block must bind the same addresses and port (line ${listen.line} has ${listen.addresses.join(' ')} port ${listen.port})`,
          source,
        );
      if (zones.some((z) => z.zone === zone)) fail(block, `zone ${zone} has two server blocks`, source);
      if (zone !== ROOT && !Array.isArray(forward.servers))
        fail(forward, `forward: a resolv.conf path is only supported in the "." block`, source);
      zones.push({
        zone,
        servers: forward.servers,
        forceTcp: forward.forceTcp,
        cache: cache?.cache ?? 'off',
        capacity: cache?.capacity ?? 0,
      });
    }
  }
  const root = zones.find((z) => z.zone === ROOT);
  const rules: ServerRule[] = zones
    .filter((z) => z.zone !== ROOT)
    .map((z) => ({
      domains: [z.zone],
      servers: z.servers as readonly HostPort[],
      forceTcp: z.forceTcp,
      cache: z.cache,
      // The cluster's DNS already sent unknown reverse names upstream: asking again is waste.
      fallThrough: false,
    }));
  const first = listen as { addresses: string[]; port: number };
  return {
    listenAddresses: first.addresses,
    port: first.port,
    rules,
    root,
    // One LRU serves every block here, so the largest block's capacity, not their sum (which would
    // be ~60,000 answers for nodelocaldns.yaml's four blocks, where one block holds ~all of them).
    cacheSize: zones.reduce((n, z) => Math.max(n, z.capacity), 0),
    metrics,
    health,
    lameduckMs,
    logQueries,
    loopDetect,
    prefetchHits,
    reloadMs,
    forwardMax,
  };
}
