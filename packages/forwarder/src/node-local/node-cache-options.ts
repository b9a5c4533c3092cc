import { isIP } from 'node:net';
import {
  FlagError,
  type FlagValues,
  flag,
  parseGoDurationMs,
  parseHostPort,
  tcpBackpressureFlags,
} from '@cluster-dns/runtime';
import { isolationFlags } from '../isolation/isolation-flags.js';
import type { Firewall } from './node-plumbing.js';

/** `-syncinterval 60` (node-cache's seconds) or a Go duration (`30s`). */
function parseSyncInterval(raw: string, name: string): number {
  if (/^\d+$/.test(raw)) {
    if (Number(raw) < 1) throw new FlagError(name, raw, 'at least 1 second');
    return Number(raw) * 1000;
  }
  const ms = parseGoDurationMs(raw, name);
  if (ms < 1000) throw new FlagError(name, raw, 'at least 1s');
  return ms;
}

/**
 * node-cache's flags (kubernetes/dns cmd/node-cache/main.go), so the upstream nodelocaldns.yaml
 * DaemonSet runs with only its image changed. Go's spellings all parse: `-flag value`,
 * `-flag=value`, `--flag`. A few of ours follow, named in the node-local README beside it.
 */
export const nodeCacheFlags = {
  localip: flag.string(
    'comma-separated IPs to listen on and put on the interface, IPv4, IPv6 or both (e.g. 169.254.20.10,10.96.0.10; a dual-stack node adds fd00::/8 ones), each family’s rules in its own iptables',
    '',
    {
      check: (raw) => {
        const ips = raw.split(',');
        if (ips.some((ip) => isIP(ip) === 0)) return 'comma-separated IP addresses';
        return undefined;
      },
    },
  ),
  upstreamsvc: flag.string(
    'Service whose ClusterIP fills __PILLAR__CLUSTER__DNS__ (read from <NAME>_SERVICE_HOST, as the kubelet sets it)',
    'kube-dns',
  ),
  setupinterface: flag.bool('create the interface and put the local IPs on it', { defaultValue: true }),
  setupiptables: flag.bool('add the NOTRACK and ACCEPT rules (iptables or nft, see -firewall)', { defaultValue: true }),
  interfacename: flag.string('name of the interface holding the local IPs', 'nodelocaldns'),
  'interface-type': flag.string(
    'link type of that interface: dummy on a node; tests on kernels without the dummy module pass bridge',
    'dummy',
    { check: (raw) => (/^[a-z0-9_-]+$/.test(raw) ? undefined : 'an ip link type such as dummy') },
  ),
  firewall: flag.enumOf<'auto' | Firewall>(
    'where the rules go: auto (iptables-legacy if its tables hold rules, else native nft if nft works, else iptables), nft, iptables or iptables-legacy',
    ['auto', 'nft', 'iptables', 'iptables-legacy'],
    'auto',
  ),
  'health-port': flag.int('port of the Corefile’s health plugin; also given NOTRACK rules', 8080, {
    min: 1,
    max: 65535,
  }),
  'metrics-listen-address': flag.custom(
    'where node-cache’s own metrics (setup errors) are served',
    { host: '0.0.0.0', port: 9353 },
    (raw, name) => parseHostPort(raw.startsWith(':') ? `0.0.0.0${raw}` : raw, 9353, name),
    { defaultText: '0.0.0.0:9353', valueName: 'ip:port' },
  ),
  syncinterval: flag.custom(
    'how often the interface and rules are checked and repaired (seconds, or a Go duration)',
    60_000,
    parseSyncInterval,
    {
      defaultText: '60',
      valueName: 'seconds',
    },
  ),
  workers: flag.int(
    'worker threads, each binding the DNS port with SO_REUSEPORT (Node.js 22.12+); 0: from the CPU given, one per whole core of the cgroup’s CPU quota (1 under two cores), within the affinity, 2 without a quota; 1 where SO_REUSEPORT does not work',
    0,
    { min: 0, max: 256 },
  ),
  validate: flag.bool(
    'read -basecorefile filled as node-cache fills it (and what it imports), print each server block’s plugins in the order a query meets them and where each line came from, then exit: 0, or 2 naming the first line refused. Touches nothing on the node',
  ),
  skipteardown: flag.bool('leave the interface and rules on exit (for a hand-over between two instances)'),
  basecorefile: flag.string(
    'the node-local-dns ConfigMap’s Corefile: the template, with its placeholders',
    '/etc/coredns/Corefile.base',
  ),
  conf: flag.string(
    'where the filled-in Corefile is written (for people to read; a failed write is only logged)',
    '/etc/Corefile',
    {
      aliases: ['corefile'],
    },
  ),
  kubednscm: flag.string(
    'the kube-dns ConfigMap mount (stubDomains, upstreamNameservers); /etc/kube-dns when it exists',
    '',
  ),
  pidfile: flag.string('write the process ID here once serving', ''),
  'resolv-file': flag.string(
    'the nameservers of "forward . /etc/resolv.conf" (the node’s own, with dnsPolicy Default)',
    '/etc/resolv.conf',
  ),
  'notify-listen-address': flag.custom(
    'where DNS NOTIFY from the record-builder is taken (the node’s address it reaches; NOTIFY only, from anyone: it only makes the cache fetch the changes from the cluster’s DNS); empty = off',
    { host: '0.0.0.0', port: 9354 } as { host: string; port: number } | undefined,
    (raw, name) => (raw === '' ? undefined : parseHostPort(raw.startsWith(':') ? `0.0.0.0${raw}` : raw, 9354, name)),
    { defaultText: '0.0.0.0:9354', valueName: 'ip:port' },
  ),
  'carry-client-address': flag.bool(
    'name the asking pod’s address to the cluster’s DNS (the blocks forwarding to __PILLAR__CLUSTER__DNS__ only), in an EDNS0 option the Pod’s forwarder trusts from the addresses its --trust-client-address-from lists',
    { defaultValue: true },
  ),
  autopath: flag.string(
    'server-side search (CoreDNS’s autopath) for this cluster domain, done here where the pod is seen: a pod’s first search-suffixed question is walked through this cache and answered with a CNAME to the name that exists; reads the record-builder’s client map through the cluster block (--pods=verified there); the node’s search domains after the cluster’s are --resolv-file’s search line; empty = off',
    '',
    { valueName: 'zone' },
  ),
  'namespace-metrics': flag.int(
    'count queries by the asking pod’s namespace (clusterdns_forwarder_namespace_queries_total), from the record-builder’s client map through the cluster block: the first N namespaces seen each a series, the rest "other"; 0 = off',
    0,
    { min: 0, max: 1000 },
  ),
  'cache-size': flag.int(
    'answers cached at most, for every block together; 0 = the largest block’s success + denial capacity (19,968 for nodelocaldns.yaml)',
    0,
    { min: 0, max: 10_000_000 },
  ),
  lameduck: flag.duration(
    'after SIGTERM, keep answering this long before closing (the Corefile’s health lameduck wins)',
    0,
  ),
  ...tcpBackpressureFlags(),
  ...isolationFlags(),
  v: flag.int('log verbosity; 4 or more logs debug lines', 0, { min: 0 }),
};

export type NodeCacheValues = FlagValues<typeof nodeCacheFlags>;

export function localIpsOf(values: NodeCacheValues): string[] {
  if (values.localip === '') throw new FlagError('-localip', undefined, 'one or more IP addresses (it is required)');
  return [...new Set(values.localip.split(','))];
}
