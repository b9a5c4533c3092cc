import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import {
  type AclRule,
  aclRuleOf,
  ednsPacketMaxFlag,
  FlagError,
  type FlagValues,
  flag,
  type HostPort,
  parseHostPort,
  type TcpBackpressure,
  tcpBackpressureFlags,
  toTcpBackpressure,
} from '@cluster-dns/runtime';
import { type Cidr, type Fqdn, isDns1123Label, type ListenDnsOptions, parseCidr, toFqdn } from '@cluster-dns/wire';
import { parseServerFlag, type ServerRule } from './config/server-flag.js';
import { type IsolationOptions, isolationFlags, toIsolationOptions } from './isolation/isolation-flags.js';
import { type AutopathSettings, searchDomainsOf } from './plugins/autopath/search-path.js';

const ttlFlag = (help: string, defaultValue: number) => flag.int(help, defaultValue, { min: 0, max: 2_147_483_647 });

/** An IP address or CIDR block, as the address-list flags take each item. */
function cidrOf(raw: string, name: string): Cidr {
  const cidr = parseCidr(raw);
  if (!cidr) throw new FlagError(name, raw, 'an IP address or a CIDR block such as 10.0.0.0/8');
  return cidr;
}

/**
 * The forwarder's flags: dnsmasq's names (so kube-dns's dnsmasq args run unmodified), the
 * nanny's config dir, and ours. Drives parsing and --help.
 */
export const forwarderFlags = {
  server: flag.list(
    'upstream for some domains (/domain/ip[#port], longest suffix wins) or for everything (ip[#port])',
    parseServerFlag,
    {
      aliases: ['S'],
    },
  ),
  port: flag.int('DNS port (UDP and TCP); 0 picks a free one', 53, { aliases: ['p'], min: 0, max: 65535 }),
  'listen-address': flag.list(
    'address to listen on (repeatable)',
    (raw, name) => {
      if (!isIP(raw)) throw new FlagError(name, raw, 'an IP address');
      return raw;
    },
    { aliases: ['a'], defaultText: '0.0.0.0' },
  ),
  'no-resolv': flag.bool('do not read upstreams from --resolv-file', { aliases: ['R'] }),
  'resolv-file': flag.string(
    'file whose nameserver lines are the default upstreams (re-read when it changes)',
    '/etc/resolv.conf',
    {
      aliases: ['r'],
    },
  ),
  'cache-size': flag.int('cache entries; 0 disables the cache', 150, { aliases: ['c'], min: 0, max: 10_000_000 }),
  corefile: flag.string(
    "Corefile mode: read a CoreDNS Corefile (the coredns ConfigMap's) for the listeners, routes, cache, rewrite, hosts, health and metrics, instead of dnsmasq's flags and the kube-dns ConfigMap; its kubernetes zones go to --kubernetes-server",
    '',
    { aliases: ['conf'] },
  ),
  validate: flag.bool(
    'with --corefile: read the Corefile and what it imports, print each server block’s plugins in the order a query meets them and where each line came from, then exit: 0, or 2 naming the first line refused. Binds nothing',
  ),
  'kubernetes-server': flag.string(
    "Corefile mode: where the kubernetes plugin's zones are asked (the record-builder)",
    '127.0.0.1#10053',
    {
      check: (raw) => {
        try {
          parseHostPort(raw, 53);
          return undefined;
        } catch {
          return 'an IP address with a port, such as 127.0.0.1#10053';
        }
      },
    },
  ),
  'no-negcache': flag.bool(
    'do not cache NXDOMAIN or NODATA answers, except in zones whose changes are pushed (NOTIFY), where they are dropped the moment the name appears',
    { aliases: ['N'] },
  ),
  'neg-ttl': ttlFlag(
    'negative TTL when the answer carries no SOA, and a cap on negative TTLs; 0 = only the SOA decides',
    0,
  ),
  'min-cache-ttl': ttlFlag('cache answers at least this many seconds (TTLs served count down from it)', 0),
  'max-cache-ttl': ttlFlag('cache answers at most this many seconds; 0 = no cap', 0),
  'dns-forward-max': flag.int(
    'upstream questions in flight at most, for each route (the cluster zone, each reverse zone, each stub domain, the default upstreams); past it, REFUSED at once',
    150,
    { aliases: ['0'], min: 1, max: 100_000 },
  ),
  'dns-0x20': flag.bool(
    'ask upstreams in a random case (0x20) and drop replies that do not echo it; a server that does not is asked in plain case for an hour',
  ),
  'kept-loopback-sockets': flag.bool(
    'ask upstreams on loopback (127.0.0.0/8, ::1: the record-builder in the Pod) over four kept sockets each, not a socket of its own per query: nobody off the host can forge a reply there, and a socket per miss was a third of its cost',
    { defaultValue: true },
  ),
  'dns-loop-detect': flag.bool(
    'send a probe through each upstream at start and on config change; disable any that loops back here',
  ),
  'log-queries': flag.bool('log each query and where it went', { aliases: ['q'] }),
  'config-dir': flag.string(
    'kube-dns ConfigMap mount (stubDomains, upstreamNameservers, clientLimits), watched for changes (dnsmasq-nanny: -configDir)',
    '',
    { aliases: ['configDir'] },
  ),
  'config-poll-interval': flag.duration(
    'how often --config-dir and --resolv-file are checked for changes (dnsmasq-nanny: -syncInterval)',
    10_000,
    { aliases: ['syncInterval'] },
  ),
  'upstream-timeout': flag.duration('wait this long for one upstream before trying the next', 1_500),
  'forward-deadline': flag.duration('answer SERVFAIL when no upstream of the route answered in this time', 4_000),
  // Sized for node caches: NodeLocal DNSCache forwards the cluster zones with force_tcp and keeps
  // its connections, so a replica serving thousands of nodes holds thousands of them (~12 KiB each).
  'max-tcp-connections': flag.int('client TCP connections at most', 5000, { min: 1, max: 1_000_000 }),
  'max-tcp-connections-per-client': flag.int(
    'TCP connections from one client address at most, so one client cannot take them all',
    100,
    { min: 1, max: 1_000_000 },
  ),
  // Longer than the 10 s after which CoreDNS's forward (node-cache's) drops an idle pooled
  // connection: the client closes first, so a query never races our close on a reused connection.
  'tcp-idle-timeout': flag.duration('close a client TCP connection idle this long (RFC 7766)', 30_000),
  ...tcpBackpressureFlags(),
  'edns-packet-max': ednsPacketMaxFlag(),
  ...isolationFlags(),
  workers: flag.int(
    'forwarders in one process sharing one cache, each binding the DNS port with SO_REUSEPORT so the kernel spreads clients over them; above 1 needs Node.js 22.12+',
    1,
    { min: 1, max: 256 },
  ),
  'metrics-port': flag.int('Prometheus /metrics port (CoreDNS’s 9153); 0 picks a free one', 9153, {
    min: 0,
    max: 65535,
  }),
  'metrics-address': flag.string('address /metrics listens on', '0.0.0.0', {
    check: (raw) => (isIP(raw) ? undefined : 'an IP address'),
  }),
  'soa-check-interval': flag.duration(
    'how often each pushed zone’s SOA serial is checked against its server, so a lost NOTIFY costs at most this; 0 = never',
    5_000,
  ),
  'use-stale-cache': flag.int(
    'serve an expired answer up to this many seconds past its TTL when every server of its route fails (RFC 8767); 0 = never',
    86_400,
    { min: 0, max: 2_147_483_647 },
  ),
  'stale-server-routes': flag.bool(
    'serve stale answers for --server=/domain/ routes too (by default only stub domains and the default upstreams: in kube-dns’s layout the /domain/ routes are the record-builder’s zones, where a dead pod IP is worse than an error)',
  ),
  'prefetch-hits': flag.int(
    'refresh an entry asked this many times in the background once a tenth to a fifth of its TTL is left (drawn per entry, so entries cached together are not refreshed together); 0 = never',
    2,
    { min: 0, max: 1_000_000 },
  ),
  'transfer-relay-from': flag.list(
    'client addresses (IP or CIDR) whose zone transfers (IXFR, AXFR over TCP) of a --server zone are relayed to its server: the node caches kept fresh by push (the nodes’ network); none by default',
    cidrOf,
  ),
  autopath: flag.custom(
    'server-side search (CoreDNS’s autopath) for this cluster domain: the first search-suffixed question of a pod with the kubelet’s default search path is walked here and answered with a CNAME to the name that exists; reads the record-builder’s client map, so it needs --pods=verified there; empty = off',
    undefined as Fqdn | undefined,
    (raw, name) => domainOf(raw, name),
    { valueName: 'zone', defaultText: 'off' },
  ),
  'autopath-search': flag.list(
    'the node’s search domains, after the cluster’s in a pod’s search path (the kubelet appends its --resolv-conf’s), walked by --autopath in that order (repeatable); by default the search line of --resolv-file',
    (raw, name) => domainOf(raw, name),
    { valueName: 'domain', defaultText: 'the search line of --resolv-file' },
  ),
  acl: flag.list(
    'who may ask what, as a Corefile acl line for every name: "ACTION [type QTYPE...] [net CIDR...] [namespace NS...]", ACTION allow, block (REFUSED), filter (empty NOERROR) or drop; repeatable, the first matching rule decides, none matching: allowed',
    (raw, name) =>
      aclRuleOf(raw.trim().split(/\s+/), (message) => {
        throw new FlagError(name, raw, message);
      }),
    { valueName: 'rule' },
  ),
  'namespace-metrics': flag.int(
    'count queries by the asking pod’s namespace (clusterdns_forwarder_namespace_queries_total), read from the record-builder’s client map (--pods=verified there): the first N namespaces seen each a series, the rest "other", clients no pod holds "unknown"; 0 = off',
    0,
    { min: 0, max: 1000 },
  ),
  'trust-client-address-from': flag.list(
    'addresses (IP or CIDR) whose queries may name the pod they ask for (a node cache’s EDNS0 option, -carry-client-address): per-client limits then count that pod, not the node cache; the nodes’ addresses; none by default',
    cidrOf,
  ),
  lameduck: flag.duration('after SIGTERM, keep answering this long before closing', 5_000),
  'keep-in-foreground': flag.accepted('accepted (dnsmasq -k); the forwarder always runs in the foreground', {
    aliases: ['k'],
  }),
  'no-daemon': flag.accepted('accepted (dnsmasq -d)', { aliases: ['d'] }),
  'log-facility': flag.accepted('accepted (dnsmasq --log-facility=-); logs go to stdout as JSON lines', {
    aliases: ['8'],
    takesValue: true,
  }),
  user: flag.accepted('accepted (dnsmasq --user); run the container as the user you want', {
    aliases: ['u'],
    takesValue: true,
  }),
  'strict-order': flag.accepted('accepted (dnsmasq -o); servers are always tried in order', { aliases: ['o'] }),
  'no-hosts': flag.accepted('accepted (dnsmasq --no-hosts); /etc/hosts is never read'),
  'bind-interfaces': flag.accepted('accepted (dnsmasq --bind-interfaces); sockets are bound to the listen addresses'),
  'domain-needed': flag.accepted('accepted (dnsmasq --domain-needed)'),
  // dnsmasq-nanny's own flags, which kube-dns.yaml gives before `--` (the dnsmasq flags after it):
  // the image swaps in for the nanny and dnsmasq together. -configDir and -syncInterval are
  // aliases above; -v is ours.
  restartDnsmasq: flag.accepted(
    'accepted (dnsmasq-nanny): a ConfigMap change is applied without a restart, whatever it says',
    { takesValue: false },
  ),
  kubednsServer: flag.accepted(
    'accepted (dnsmasq-nanny): hostnames as stub servers are not resolved here; use addresses',
    { takesValue: true },
  ),
  dnsmasqExec: flag.accepted('accepted (dnsmasq-nanny): there is no dnsmasq to run', { takesValue: true }),
  logInterval: flag.accepted('accepted (dnsmasq-nanny): the statistics are always in /metrics and over CHAOS', {
    takesValue: true,
  }),
  // klog's flags, which kube-dns's images take: logs are JSON lines on stdout whatever they say.
  logtostderr: flag.accepted('accepted (klog)'),
  alsologtostderr: flag.accepted('accepted (klog)'),
  stderrthreshold: flag.accepted('accepted (klog)', { takesValue: true }),
  vmodule: flag.accepted('accepted (klog)', { takesValue: true }),
  log_dir: flag.accepted('accepted (klog)', { takesValue: true }),
  log_file: flag.accepted('accepted (klog)', { takesValue: true }),
  v: flag.int('log verbosity; 4 or more logs debug lines', 0, { min: 0 }),
};

export interface ForwarderOptions {
  readonly rules: readonly ServerRule[];
  readonly listenAddresses: readonly string[];
  readonly port: number;
  readonly resolvFile: string | undefined;
  readonly cacheSize: number;
  readonly negativeCache: boolean;
  readonly negTtlSeconds: number;
  readonly minCacheTtlSeconds: number;
  readonly maxCacheTtlSeconds: number;
  /** Each route's share of upstream questions in flight (--dns-forward-max). */
  readonly forwardMax: number;
  /** What one client may take from the others: rate limits, shedding, route shares' jostling, the subdomain guard. */
  readonly isolation: IsolationOptions;
  readonly loopDetect: boolean;
  /** Ask loopback upstreams over kept sockets (--kept-loopback-sockets). */
  readonly keptLoopbackSockets: boolean;
  /** --dns-0x20: randomise the case of names sent upstream, and check the reply echoes it. */
  readonly randomCase: boolean;
  readonly logQueries: boolean;
  readonly configDir: string;
  readonly configPollMs: number;
  readonly upstreamTimeoutMs: number;
  readonly forwardDeadlineMs: number;
  readonly maxTcpConnections: number;
  readonly maxTcpConnectionsPerClient: number;
  readonly tcpIdleTimeoutMs: number;
  /** How much of its replies a TCP client that does not read may leave waiting here. */
  readonly tcpBackpressure: TcpBackpressure;
  readonly ednsPacketMax: number;
  readonly metricsPort: number;
  readonly metricsAddress: string;
  readonly soaCheckMs: number;
  readonly maxStaleSeconds: number;
  readonly staleServerRoutes: boolean;
  readonly prefetchHits: number;
  readonly lameduckMs: number;
  /** Bind with SO_REUSEPORT, so a new instance can take over without a gap (node-local mode). */
  readonly reusePort: boolean;
  /** --transfer-relay-from: who may transfer a --server zone through us. */
  readonly transferRelayFrom: readonly Cidr[];
  /**
   * Node-local mode: where NOTIFY is also taken (the node's address, which the record-builder
   * reaches), and from any source: a NOTIFY there only makes us fetch from the zone's own server.
   */
  readonly notifyListen?: { readonly host: string; readonly port: number };
  /** Further addresses and ports answered alike (a Corefile's blocks on other ports); none from flags. */
  readonly moreListeners?: ReadonlyArray<{ readonly addresses: readonly string[]; readonly port: number }>;
  /** What sets the listeners, for a bind error to name (a Corefile's server block; the flags by default). */
  readonly listenFlags?: string;
  /** --autopath: server-side search of the cluster's default search path (autopath/). */
  readonly autopath?: AutopathSettings;
  /** The cluster zone, where the record-builder's client map is (a Corefile's kubernetes zone); cluster.local by default. */
  readonly clusterZone?: Fqdn;
  /** --namespace-metrics: the named series of queries per namespace; 0, none counted. */
  readonly namespaceSeries: number;
  /** --acl: rules for every name, before those of a Corefile's acl blocks. */
  readonly acl: readonly AclRule[];
}

/** The cluster zone, where the client map is: a Corefile's kubernetes zone, --autopath's, or cluster.local. */
export function clusterZoneOf(options: Pick<ForwarderOptions, 'clusterZone' | 'autopath'>): Fqdn {
  return options.clusterZone ?? options.autopath?.zone ?? toFqdn('cluster.local');
}

/** The search line of the node's resolv.conf, read once at start (none when it cannot be read). */
export function resolvSearchOf(path: string | undefined): Fqdn[] {
  if (path === undefined) return [];
  try {
    return searchDomainsOf(readFileSync(path, 'utf8'));
  } catch {
    // No resolv.conf: no node domains after the cluster's, as a pod on such a node would have.
    return [];
  }
}

/** A domain flag's value as an FQDN: DNS-1123 labels separated by dots. */
export function domainOf(raw: string, name: string): Fqdn | undefined {
  if (raw === '') return undefined;
  const zone = toFqdn(raw);
  if (zone === '.' || !zone.slice(0, -1).split('.').every(isDns1123Label))
    throw new FlagError(name, raw, 'DNS-1123 labels separated by dots, such as cluster.local');
  return zone;
}

export function toForwarderOptions(values: FlagValues<typeof forwarderFlags>): ForwarderOptions {
  if (values['max-cache-ttl'] > 0 && values['min-cache-ttl'] > values['max-cache-ttl']) {
    throw new FlagError(
      '--min-cache-ttl',
      String(values['min-cache-ttl']),
      `at most --max-cache-ttl (${values['max-cache-ttl']})`,
    );
  }
  if (values['forward-deadline'] < values['upstream-timeout']) {
    throw new FlagError('--forward-deadline', `${values['forward-deadline']}ms`, 'at least --upstream-timeout');
  }
  return Object.freeze({
    rules: Object.freeze([...values.server]),
    listenAddresses: values['listen-address'].length ? [...new Set(values['listen-address'])] : ['0.0.0.0'],
    port: values.port,
    resolvFile: values['no-resolv'] ? undefined : values['resolv-file'],
    cacheSize: values['cache-size'],
    negativeCache: !values['no-negcache'],
    negTtlSeconds: values['neg-ttl'],
    minCacheTtlSeconds: values['min-cache-ttl'],
    maxCacheTtlSeconds: values['max-cache-ttl'],
    forwardMax: values['dns-forward-max'],
    isolation: toIsolationOptions(values),
    loopDetect: values['dns-loop-detect'],
    keptLoopbackSockets: values['kept-loopback-sockets'],
    randomCase: values['dns-0x20'],
    logQueries: values['log-queries'],
    configDir: values['config-dir'],
    configPollMs: values['config-poll-interval'],
    upstreamTimeoutMs: values['upstream-timeout'],
    forwardDeadlineMs: values['forward-deadline'],
    maxTcpConnections: values['max-tcp-connections'],
    maxTcpConnectionsPerClient: values['max-tcp-connections-per-client'],
    tcpIdleTimeoutMs: values['tcp-idle-timeout'],
    tcpBackpressure: toTcpBackpressure(values),
    ednsPacketMax: values['edns-packet-max'],
    metricsPort: values['metrics-port'],
    metricsAddress: values['metrics-address'],
    soaCheckMs: values['soa-check-interval'],
    maxStaleSeconds: values['use-stale-cache'],
    staleServerRoutes: values['stale-server-routes'],
    prefetchHits: values['prefetch-hits'],
    lameduckMs: values.lameduck,
    reusePort: false,
    transferRelayFrom: Object.freeze([...values['transfer-relay-from']]),
    namespaceSeries: values['namespace-metrics'],
    acl: Object.freeze([...values.acl]),
    ...(values.autopath
      ? {
          autopath: {
            zone: values.autopath,
            extraSearch: values['autopath-search'].length
              ? values['autopath-search'].filter((d): d is Fqdn => d !== undefined)
              : resolvSearchOf(values['no-resolv'] ? undefined : values['resolv-file']),
          },
        }
      : {}),
  });
}

export type { HostPort };

/**
 * How every socket of the forwarder's DNS port is bound, worker 0's and each lane's alike (plain
 * data: a lane gets it in its workerData), and how long each drains: every upstream question in
 * flight ends by --forward-deadline at the latest.
 */
export interface ListenerSettings {
  readonly listen: Pick<
    ListenDnsOptions,
    | 'flags'
    | 'tcpIdleTimeoutMs'
    | 'maxTcpConnections'
    | 'maxTcpConnectionsPerClient'
    | 'maxTcpUnsentBytes'
    | 'maxTcpUnsentTotalBytes'
    | 'tcpWriteTimeoutMs'
    | 'shedAfterMs'
  >;
  readonly drainMs: number;
}

export function listenerSettingsOf(options: ForwarderOptions): ListenerSettings {
  return {
    listen: {
      flags: options.listenFlags ?? '--listen-address, --port',
      tcpIdleTimeoutMs: options.tcpIdleTimeoutMs,
      maxTcpConnections: options.maxTcpConnections,
      maxTcpConnectionsPerClient: options.maxTcpConnectionsPerClient,
      ...options.tcpBackpressure,
      shedAfterMs: options.isolation.shedAfterMs,
    },
    drainMs: options.forwardDeadlineMs + 500,
  };
}
