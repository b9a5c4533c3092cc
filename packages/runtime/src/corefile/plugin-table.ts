/**
 * Every plugin a Corefile may name, in CoreDNS's compiled order (coredns/coredns plugin.cfg, as of
 * 1.14: rewrite, autopath and acl before cache), with what this stack does with it. The order is
 * the order a query meets them, whatever order the Corefile writes them in; `-validate` prints a
 * block's plugins in it, and docs/corefile.md is held to this table by a test.
 */

/** What becomes of a plugin named in a Corefile. */
export type PluginSupport =
  /** Run here: `by` says which process does its work. */
  | { readonly status: 'runs'; readonly by: 'forwarder' | 'record-builder' | 'both' }
  /** Accepted and not needed here; a warning says why (`note`). */
  | { readonly status: 'ignored'; readonly note: string }
  /** Refused: the Corefile does not start, and `note` says what to do instead. */
  | { readonly status: 'refused'; readonly note: string };

const runs = (by: 'forwarder' | 'record-builder' | 'both'): PluginSupport => ({ status: 'runs', by });
const ignored = (note: string): PluginSupport => ({ status: 'ignored', note });
const refused = (note: string): PluginSupport => ({ status: 'refused', note });

const NOT_A_BACKEND =
  'this stack answers the cluster from the Kubernetes API and forwards the rest; keep a CoreDNS for that zone and forward to it (forward ZONE ADDRESS)';

/** plugin.cfg's order, each with our support. `proxy` (removed in CoreDNS 1.4) sits where forward does. */
export const PLUGIN_TABLE: ReadonlyArray<readonly [string, PluginSupport]> = [
  ['root', runs('forwarder')],
  ['metadata', ignored('metadata is only read by other plugins’ {/label} placeholders here, which print "-"')],
  ['geoip', refused('no GeoIP database is read here; keep that in a CoreDNS behind a forward')],
  ['cancel', ignored('every query here has a deadline already (the forward plugin’s)')],
  ['proxyproto', refused('PROXY protocol listeners are not supported')],
  ['quic', refused('DNS over QUIC is not served; serve plain DNS (dns://) here')],
  ['grpc_server', refused('DNS over gRPC is not served; serve plain DNS (dns://) here')],
  ['https', refused('DNS over HTTPS is not served; serve plain DNS (dns://) here')],
  ['https3', refused('DNS over HTTP/3 is not served; serve plain DNS (dns://) here')],
  ['timeouts', ignored('the listeners’ timeouts are the forwarder’s flags (--tcp-idle-timeout)')],
  [
    'multisocket',
    ignored('worker count follows the CPU given (--workers, node-local -workers); each binds with SO_REUSEPORT'),
  ],
  ['reload', runs('both')],
  ['nsid', ignored('no NSID option is added to answers')],
  ['bufsize', runs('forwarder')],
  ['bind', runs('both')],
  ['debug', ignored('logs at debug with --v=4')],
  ['trace', ignored('no tracing exporter here')],
  ['ready', runs('record-builder')],
  ['health', runs('forwarder')],
  ['pprof', ignored('no Go profiler; profile with node --cpu-prof')],
  ['shed', ignored('overload is shed by the listeners (--shed-after) and each route’s share (--dns-forward-max)')],
  ['prometheus', runs('both')],
  ['errors', runs('forwarder')],
  ['log', runs('forwarder')],
  ['dnstap', refused('no dnstap sink is written; use log')],
  ['local', ignored('localhost names are forwarded as any other (the upstream answers them)')],
  ['dns64', runs('forwarder')],
  ['any', runs('forwarder')],
  ['chaos', runs('forwarder')],
  ['loadbalance', runs('forwarder')],
  ['tsig', refused('TSIG is not checked here')],
  ['rewrite', runs('forwarder')],
  ['autopath', runs('forwarder')],
  ['acl', runs('forwarder')],
  ['cache', runs('forwarder')],
  ['header', refused('header bits are not rewritten here')],
  ['dnssec', refused('answers are not signed here; sign the zone where it is served')],
  ['tls', refused('DNS over TLS is not served; serve plain DNS (dns://) here (forward to tls:// upstreams works)')],
  ['minimal', ignored('answers keep their authority and additional sections')],
  ['template', runs('forwarder')],
  [
    'transfer',
    ignored(
      'the cluster zone is transferred to the node caches by the record-builder (NOTIFY, IXFR); other transfers are not served',
    ),
  ],
  ['hosts', runs('forwarder')],
  ['route53', refused(NOT_A_BACKEND)],
  ['azure', refused(NOT_A_BACKEND)],
  ['clouddns', refused(NOT_A_BACKEND)],
  ['federation', refused('federation was removed from CoreDNS (1.7); use the multicluster option of kubernetes')],
  ['k8s_external', runs('both')],
  ['kubernetes', runs('both')],
  ['file', runs('forwarder')],
  ['auto', refused('zone files are read with file, one per zone')],
  ['secondary', refused('zones are not transferred in here; use file, or forward the zone to its primary')],
  ['etcd', refused(NOT_A_BACKEND)],
  ['loop', runs('forwarder')],
  ['forward', runs('forwarder')],
  ['proxy', runs('forwarder')],
  ['grpc', refused('DNS over gRPC upstreams are not supported; forward over UDP/TCP or tls://')],
  ['erratic', refused('a test plugin')],
  ['whoami', runs('forwarder')],
  ['on', refused('no events run commands here')],
  ['sign', refused('zones are not signed here')],
  ['view', refused('views are not supported: every client gets the same server block')],
  ['nomad', refused(NOT_A_BACKEND)],
];

const BY_NAME = new Map(PLUGIN_TABLE.map(([name, support], index) => [name, { support, index }]));

/** A plugin's place in the order and its support; undefined for a name CoreDNS has no plugin of. */
export function pluginOf(name: string): { support: PluginSupport; index: number } | undefined {
  return BY_NAME.get(name);
}

/**
 * Plugins CoreDNS lets a server block name once (those whose setup returns plugin.ErrOnce: cache,
 * errors, hosts, kubernetes, loop, prometheus, ready), and ours that hold one value per block: a
 * second, here or through an import, is CoreDNS's own error.
 */
export const ONCE_PER_BLOCK: ReadonlySet<string> = new Set([
  'cache',
  'errors',
  'hosts',
  'kubernetes',
  'loop',
  'prometheus',
  'ready',
  'autopath',
  'bufsize',
  'chaos',
  'dns64',
  'k8s_external',
  'root',
]);
