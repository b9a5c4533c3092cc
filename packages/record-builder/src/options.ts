import { isIP } from 'node:net';
import {
  ednsPacketMaxFlag,
  FlagError,
  type FlagValues,
  flag,
  type HostPort,
  parseHostPort as runtimeHostPort,
  type TcpBackpressure,
  tcpBackpressureFlags,
  toTcpBackpressure,
} from '@cluster-dns/runtime';
import { type Fqdn, isDns1123Label, isInZone, parseCidr, toFqdn } from '@cluster-dns/wire';
import type { CorefileRecordBuilder } from './corefile-options.js';
import type { ExternalZone } from './external-records.js';
import type { PodsMode } from './pod-records.js';

const address = (what: string) => (raw: string) => (isIP(raw) ? undefined : `an IP address to ${what}`);

/** The record-builder's flags: kube-dns's names and defaults, plus ours. Drives parsing and --help. */
export const recordBuilderFlags = {
  domain: flag.string('cluster DNS zone served authoritatively', 'cluster.local.'),
  corefile: flag.string(
    'Corefile mode: read a CoreDNS Corefile (the coredns ConfigMap’s); its kubernetes plugin sets the zone, pods, TTL, API server and answers’ options over the flags, and its ready plugin serves /ready',
    '',
    { aliases: ['conf'] },
  ),
  validate: flag.bool(
    'with --corefile: read the Corefile and what it imports, print each server block’s plugins in the order a query meets them and where each line came from, then exit: 0, or 2 naming the first line refused. Binds nothing',
  ),
  'dns-bind-address': flag.string('address to serve DNS on (UDP and TCP)', '0.0.0.0', { check: address('listen on') }),
  'dns-port': flag.int('port to serve DNS on (UDP and TCP); 0 picks a free one', 10053, { min: 0, max: 65535 }),
  // Sized for push to node caches: each fetches the zones that changed over TCP, relayed by the
  // Pod's forwarder, so a replica serving thousands of nodes sees thousands of short transfer
  // connections at once, every one from the forwarder's address. Bench case 9: 1,000 caches
  // fetching two zones each had fetches refused at 1,000.
  'max-tcp-connections': flag.int('DNS TCP connections at most; past it new ones are closed at once', 5000, {
    min: 1,
    max: 1_000_000,
  }),
  'max-tcp-connections-per-client': flag.int(
    'DNS TCP connections from one client address at most (the forwarder, with the transfers it relays for node caches, and the sidecar are the clients)',
    5000,
    { min: 1, max: 1_000_000 },
  ),
  'tcp-idle-timeout': flag.duration('close a DNS TCP connection idle this long (RFC 7766)', 10_000),
  ...tcpBackpressureFlags(),
  'healthz-bind-address': flag.string('address of the /readiness, /healthz, /cache HTTP server', '0.0.0.0', {
    check: address('listen on'),
  }),
  'healthz-port': flag.int('port of /readiness, /healthz, /cache and /metrics; 0 picks a free one', 8081, {
    min: 0,
    max: 65535,
  }),
  'metrics-port': flag.int(
    'port of the Prometheus /metrics endpoint (kube-dns PROMETHEUS_PORT); 0 picks a free one',
    10055,
    {
      min: 0,
      max: 65535,
    },
  ),
  'kubecfg-file': flag.string('kubeconfig file; else KUBECONFIG, else the in-cluster service account', ''),
  'kube-master-url': flag.string('Kubernetes API server URL; overrides the kubeconfig server', '', {
    check: (raw) =>
      /^https?:\/\/[^/]+/.test(raw) ? undefined : 'a URL with a scheme and a host, such as https://10.0.0.1:6443',
  }),
  'initial-sync-timeout': flag.duration(
    'wait this long for the first list of every resource, then serve what is known',
    60_000,
  ),
  'config-dir': flag.string(
    'kube-dns ConfigMap mount; only `federations` concerns this process (unsupported, warned)',
    '',
  ),
  ttl: flag.int('TTL in seconds of every record, and the negative TTL (SOA minimum)', 30, {
    min: 0,
    max: 2_147_483_647,
  }),
  namespaces: flag.list(
    'answer only these namespaces’ Services and pods (repeatable, or comma-separated); all by default (CoreDNS’s kubernetes namespaces)',
    (raw, name) => {
      const list = raw.split(',').filter(Boolean);
      if (list.length === 0 || !list.every(isDns1123Label)) throw new FlagError(name, raw, 'namespace names');
      return list;
    },
  ),
  'multicluster-zone': flag.string(
    'serve this clusterset zone (clusterset.local) from ServiceImports and their imported EndpointSlices, as KEP-1645 and CoreDNS’s kubernetes multicluster do; needs the multicluster.x-k8s.io CRDs; empty = off',
    '',
  ),
  'ignore-empty-service': flag.bool(
    'a ClusterIP Service with no ready endpoint is NXDOMAIN, not its cluster IP (CoreDNS’s kubernetes ignore empty_service)',
  ),
  'endpoint-pod-names': flag.bool(
    'name an endpoint without a hostname after its pod, not its dashed IP (CoreDNS’s kubernetes endpoint_pod_names)',
  ),
  pods: flag.enumOf(
    'pod records <a-b-c-d>.<ns>.pod.<zone>: any address, only addresses of pods in that namespace, or none',
    ['insecure', 'verified', 'disabled'] as const,
    'insecure',
  ),
  'service-cidr': flag.list(
    'the cluster’s Service CIDRs (kube-apiserver’s --service-cluster-ip-range; repeatable, or comma-separated): their reverse zones are answered here, NXDOMAIN for an unused address, so no cluster PTR query goes upstream. Unset: read from the API’s ServiceCIDR objects (networking.k8s.io/v1, Kubernetes 1.33+), a new one served without a restart',
    (raw, name) => {
      const list = raw.split(',').filter(Boolean);
      if (list.length === 0 || !list.every((c) => c.includes('/') && parseCidr(c) !== undefined))
        throw new FlagError(name, raw, 'address blocks such as 10.96.0.0/12,fd00:10:96::/108');
      return list;
    },
  ),
  'endpoints-api': flag.enumOf(
    'what to watch for endpoints: EndpointSlices, or legacy v1 Endpoints for old clusters',
    ['endpointslices', 'endpoints'] as const,
    'endpointslices',
  ),
  'transfer-to': flag.list(
    'client address allowed to transfer the zones (AXFR over TCP, IXFR); off when none',
    (raw, name) => {
      if (!isIP(raw)) throw new FlagError(name, raw, 'an IP address');
      return raw;
    },
  ),
  notify: flag.list(
    'forwarder to send DNS NOTIFY to on every change, as ip:port ([ip6]:port; port 53 when left out); repeatable. It may then IXFR the zones',
    (raw, name) => parseHostPort(raw, name),
  ),
  'notify-node-cache': flag.list(
    'node cache (node-local mode) to send DNS NOTIFY to, as ip:port (port 9354, its -notify-listen-address, when left out); repeatable. At most one per --notify-node-cache-interval each',
    (raw, name) => runtimeHostPort(raw, 9354, name),
  ),
  'notify-node-cache-interval': flag.duration(
    'at most one NOTIFY per node cache this often: the next covers every change since, so the work per node does not grow with the change rate',
    100,
  ),
  'node-cache-selector': flag.string(
    'label selector of the node-local DaemonSet’s pods (e.g. k8s-app=node-local-dns): each ready one is NOTIFYed on its node’s address (hostNetwork), at --node-cache-port, as with --notify-node-cache; empty = none',
    '',
    {
      check: (raw) =>
        raw === '' ||
        /^[A-Za-z0-9._/-]+(\s*(=|==|!=)\s*[A-Za-z0-9._-]*)?(,[A-Za-z0-9._/-]+(\s*(=|==|!=)\s*[A-Za-z0-9._-]*)?)*$/.test(
          raw,
        )
          ? undefined
          : 'a label selector such as k8s-app=node-local-dns',
    },
  ),
  'node-cache-namespace': flag.string('namespace of the node-local DaemonSet’s pods', 'kube-system', {
    check: (raw) => (/^[a-z0-9-]+$/.test(raw) ? undefined : 'a namespace name'),
  }),
  'node-cache-port': flag.int('port the node caches take NOTIFY on (their -notify-listen-address)', 9354, {
    min: 1,
    max: 65535,
  }),
  'pod-ip': flag.string(
    'this replica’s pod IP (the downward API’s status.podIP): replicas share the node caches out by rendezvous hashing over the ready addresses of --dns-service, each pushing only its own; empty = this replica pushes to all',
    '',
    { check: (raw) => (raw === '' || isIP(raw) !== 0 ? undefined : 'an IP address') },
  ),
  'ixfr-journal-mib': flag.int(
    'memory for the change journal that IXFR answers from (kept when --notify or --transfer-to is given); older changes get the whole zone',
    16,
    { min: 1, max: 4096 },
  ),
  'dns-service': flag.string(
    'namespace/name of the Service whose cluster IPs ns.dns.<zone> resolves to',
    'kube-system/kube-dns',
    {
      check: (raw) => (/^[a-z0-9-]+\/[a-z0-9-]+$/.test(raw) ? undefined : 'namespace/name'),
    },
  ),
  'edns-packet-max': ednsPacketMaxFlag(),
  'answer-cache-mib': flag.int(
    'memory for ready answers, in MiB: least recently asked out first; answers are built again on a miss',
    32,
    { min: 1, max: 65536 },
  ),
  lameduck: flag.duration('after SIGTERM, fail readiness and keep answering this long before closing', 5_000),
  v: flag.int('log verbosity (kube-dns --v); 4 or more logs debug lines', 0, { min: 0 }),
  logtostderr: flag.accepted('accepted for kube-dns compatibility; logs always go to stdout as JSON lines'),
  nameservers: flag.accepted(
    'accepted for kube-dns compatibility; names outside the zone are REFUSED here and forwarded by the forwarder',
    {
      takesValue: true,
    },
  ),
  'config-map': flag.accepted('accepted for kube-dns compatibility; mount the ConfigMap and use --config-dir instead', {
    takesValue: true,
  }),
  'config-map-namespace': flag.accepted('accepted for kube-dns compatibility (see --config-map)', { takesValue: true }),
  'config-period': flag.accepted('accepted for kube-dns compatibility; the config dir is read once at start', {
    takesValue: true,
  }),
};

export interface RecordBuilderOptions {
  readonly zone: Fqdn;
  readonly reverseZones: readonly Fqdn[];
  readonly dnsHost: string;
  readonly dnsPort: number;
  readonly maxTcpConnections: number;
  readonly maxTcpConnectionsPerClient: number;
  readonly tcpIdleTimeoutMs: number;
  /** How much of its replies a TCP client that does not read may leave waiting here. */
  readonly tcpBackpressure: TcpBackpressure;
  readonly healthzHost: string;
  readonly healthzPort: number;
  readonly metricsPort: number;
  readonly kubecfgFile: string;
  readonly masterUrl: string;
  readonly initialSyncTimeoutMs: number;
  readonly configDir: string;
  readonly ttlSeconds: number;
  readonly pods: PodsMode;
  readonly endpointsApi: 'endpointslices' | 'endpoints';
  /** --service-cidr: the Service CIDRs given; empty means read from the API's ServiceCIDRs. */
  readonly serviceCidrs: readonly string[];
  readonly transferTo: readonly string[];
  readonly notify: readonly { host: string; port: number }[];
  readonly notifyNodeCaches: readonly { host: string; port: number }[];
  readonly notifyNodeCacheIntervalMs: number;
  /** --node-cache-selector: node caches found in the API, or undefined. */
  readonly nodeCacheDiscovery: { namespace: string; labelSelector: string; port: number } | undefined;
  /** --pod-ip: this replica, among --dns-service's endpoints, for sharing node caches out. */
  readonly podIp: string;
  readonly ixfrJournalMib: number;
  readonly dnsService: { namespace: string; name: string };
  readonly ednsPacketMax: number;
  readonly answerCacheMib: number;
  readonly lameduckMs: number;
  /** The kubeconfig's context (Corefile mode's `kubeconfig FILE CONTEXT`); its current one when unset. */
  readonly kubeContext: string | undefined;
  /** Corefile mode's `ready`: where /ready answers, as CoreDNS's. */
  readonly readyAddress: HostPort | undefined;
  /** `namespaces`: only Services of these are answered; undefined: every namespace. */
  readonly namespaces: readonly string[] | undefined;
  /** `ignore empty_service`: a ClusterIP Service without a ready endpoint is NXDOMAIN. */
  readonly ignoreEmptyService: boolean;
  /** `endpoint_pod_names`: an endpoint without a hostname is named after its pod. */
  readonly endpointPodNames: boolean;
  /** --multicluster-zone (`multicluster`): the clusterset zone of ServiceImports, or undefined. */
  readonly multiclusterZone: Fqdn | undefined;
  /** A Corefile's k8s_external zones: Services' external addresses (no flag of kube-dns's). */
  readonly external: readonly ExternalZone[];
  readonly externalReverseZones: readonly Fqdn[];
}

/** Normalises and validates parsed flags into the frozen options object. */
export function toRecordBuilderOptions(values: FlagValues<typeof recordBuilderFlags>): RecordBuilderOptions {
  const zone = toFqdn(values.domain);
  if (zone === '.' || !zone.slice(0, -1).split('.').every(isDns1123Label)) {
    throw new FlagError('--domain', values.domain, 'DNS-1123 labels separated by dots, such as cluster.local');
  }
  const multiclusterZone = values['multicluster-zone'] ? toFqdn(values['multicluster-zone']) : undefined;
  if (multiclusterZone && (multiclusterZone === '.' || !multiclusterZone.slice(0, -1).split('.').every(isDns1123Label)))
    throw new FlagError(
      '--multicluster-zone',
      values['multicluster-zone'],
      'DNS-1123 labels separated by dots, such as clusterset.local',
    );
  if (
    multiclusterZone &&
    (multiclusterZone === zone || isInZone(multiclusterZone, zone) || isInZone(zone, multiclusterZone))
  )
    throw new FlagError('--multicluster-zone', values['multicluster-zone'], `a zone apart from --domain ${zone}`);
  const [namespace = '', name = ''] = values['dns-service'].split('/');
  return Object.freeze({
    zone,
    reverseZones: [toFqdn('in-addr.arpa'), toFqdn('ip6.arpa')],
    dnsHost: values['dns-bind-address'],
    dnsPort: values['dns-port'],
    maxTcpConnections: values['max-tcp-connections'],
    maxTcpConnectionsPerClient: values['max-tcp-connections-per-client'],
    tcpIdleTimeoutMs: values['tcp-idle-timeout'],
    tcpBackpressure: toTcpBackpressure(values),
    healthzHost: values['healthz-bind-address'],
    healthzPort: values['healthz-port'],
    metricsPort: values['metrics-port'],
    kubecfgFile: values['kubecfg-file'],
    masterUrl: values['kube-master-url'],
    initialSyncTimeoutMs: values['initial-sync-timeout'],
    configDir: values['config-dir'],
    ttlSeconds: values.ttl,
    pods: values.pods,
    endpointsApi: values['endpoints-api'],
    serviceCidrs: Object.freeze(values['service-cidr'].flat()),
    transferTo: Object.freeze([...values['transfer-to']]),
    notify: Object.freeze([...values.notify]),
    notifyNodeCaches: Object.freeze([...values['notify-node-cache']]),
    notifyNodeCacheIntervalMs: values['notify-node-cache-interval'],
    nodeCacheDiscovery: values['node-cache-selector']
      ? {
          namespace: values['node-cache-namespace'],
          labelSelector: values['node-cache-selector'],
          port: values['node-cache-port'],
        }
      : undefined,
    podIp: values['pod-ip'],
    ixfrJournalMib: values['ixfr-journal-mib'],
    dnsService: { namespace, name },
    ednsPacketMax: values['edns-packet-max'],
    answerCacheMib: values['answer-cache-mib'],
    lameduckMs: values.lameduck,
    kubeContext: undefined,
    readyAddress: undefined,
    namespaces: values.namespaces.length ? Object.freeze(values.namespaces.flat()) : undefined,
    ignoreEmptyService: values['ignore-empty-service'],
    endpointPodNames: values['endpoint-pod-names'],
    multiclusterZone,
    external: [],
    externalReverseZones: [],
  });
}

/**
 * The options with a Corefile's part laid over them (Corefile mode): the kubernetes plugin's zone,
 * pods, TTL, API server and answers' options, and ready's address. The DNS and health ports stay
 * the flags': the Pod's forwarder is what listens where CoreDNS did.
 */
export function withCorefile(options: RecordBuilderOptions, corefile: CorefileRecordBuilder): RecordBuilderOptions {
  return Object.freeze({
    ...options,
    zone: corefile.zone,
    pods: corefile.pods,
    ttlSeconds: corefile.ttlSeconds,
    kubecfgFile: corefile.kubecfgFile ?? options.kubecfgFile,
    kubeContext: corefile.kubeContext,
    masterUrl: corefile.masterUrl ?? options.masterUrl,
    readyAddress: corefile.ready,
    namespaces: corefile.namespaces ?? options.namespaces,
    ignoreEmptyService: corefile.ignoreEmptyService || options.ignoreEmptyService,
    endpointPodNames: corefile.endpointPodNames || options.endpointPodNames,
    multiclusterZone: corefile.clustersetZone ?? options.multiclusterZone,
    initialSyncTimeoutMs: corefile.startupTimeoutMs ?? options.initialSyncTimeoutMs,
    external: corefile.external,
    externalReverseZones: corefile.externalReverseZones,
  });
}

/** `ip:port`, `[ip6]:port`, or an address alone (port 53). */
export function parseHostPort(raw: string, name: string): { host: string; port: number } {
  const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(raw);
  const plain = /^([^:]+)(?::(\d+))?$/.exec(raw);
  const [host, port] = bracketed
    ? [bracketed[1], bracketed[2]]
    : plain
      ? [plain[1], plain[2]]
      : isIP(raw) === 6
        ? [raw, undefined]
        : [];
  const portNumber = port === undefined ? 53 : Number(port);
  if (!host || !isIP(host) || !Number.isInteger(portNumber) || portNumber < 1 || portNumber > 65535)
    throw new FlagError(name, raw, 'ip:port, such as 127.0.0.1:53 or [::1]:53');
  return { host, port: portNumber };
}

/**
 * The flag kube-dns's PROMETHEUS_PORT environment variable stands for, placed before the command
 * line's own flags so that an explicit --metrics-port still wins; or what is wrong with it.
 */
export function prometheusPortArgs(value: string | undefined): { args: string[] } | { error: string } {
  if (value === undefined || value === '') return { args: [] };
  const port = Number(value);
  if (!/^\d+$/.test(value) || port > 65535)
    return { error: `invalid value ${JSON.stringify(value)} for PROMETHEUS_PORT: expected a port number (0-65535)` };
  return { args: [`--metrics-port=${port}`] };
}
