import type { HostPort, KubeDnsConfig } from '@cluster-dns/runtime';

export const PLACEHOLDER = {
  clusterDns: '__PILLAR__CLUSTER__DNS__',
  upstreamServers: '__PILLAR__UPSTREAM__SERVERS__',
  localDns: '__PILLAR__LOCAL__DNS__',
  dnsServer: '__PILLAR__DNS__SERVER__',
} as const;

/** What node-cache fills the base Corefile with. */
export interface TemplateValues {
  /** `-localip`, in order. */
  readonly localIps: readonly string[];
  /** The port of the blocks node-cache adds (stub domains): 53. */
  readonly port: number;
  /** The ClusterIP of `-upstreamsvc`, from its `<NAME>_SERVICE_HOST` variable; undefined when unset. */
  readonly clusterDns: string | undefined;
  /** The kube-dns ConfigMap (stubDomains, upstreamNameservers). */
  readonly kubeDns: KubeDnsConfig;
  /** Where upstreams come from when the ConfigMap names none. */
  readonly resolvFile: string;
}

const hostPortText = (s: HostPort) => (s.host.includes(':') ? `[${s.host}]:${s.port}` : `${s.host}:${s.port}`);

/** `forward . __PILLAR__UPSTREAM__SERVERS__ { force_tcp }`, however it is indented or spread. */
const TCP_UPSTREAM_FORWARD = new RegExp(
  `forward\\s+\\.\\s+${PLACEHOLDER.upstreamServers}\\s*\\{\\s*force_tcp\\s*\\}`,
  'g',
);

/** `-upstreamsvc kube-dns-upstream` → `KUBE_DNS_UPSTREAM_SERVICE_HOST`, as the kubelet names it. */
export function serviceHostVariable(service: string): string {
  return `${service.replaceAll('-', '_').toUpperCase()}_SERVICE_HOST`;
}

/**
 * Fills the base Corefile as node-cache does (cmd/node-cache/app/configmap.go), so a ConfigMap
 * written for it renders the same here:
 * - `__PILLAR__UPSTREAM__SERVERS__` becomes the ConfigMap's upstreamNameservers, asked over UDP
 *   (a `force_tcp` on them is dropped, as node-cache does), or else the resolv file;
 * - `__PILLAR__CLUSTER__DNS__` becomes the upstream Service's ClusterIP;
 * - `__PILLAR__LOCAL__DNS__` becomes the local IPs, and `__PILLAR__DNS__SERVER__` nothing (the
 *   kube-dns IP, when wanted, is among the local IPs);
 * - each stub domain gets a block of its own: `cache 30`, the same binds, its servers.
 * One difference: node-cache finds the `force_tcp` block only at one exact indentation; this
 * matches it however it is spaced.
 */
export function renderCorefile(base: string, values: TemplateValues): string {
  let text = base;
  const upstreams = values.kubeDns.upstreamNameservers;
  if (upstreams.length === 0) {
    text = text.replaceAll(PLACEHOLDER.upstreamServers, values.resolvFile);
  } else {
    const servers = upstreams.map(hostPortText).join(' ');
    text = text.replace(TCP_UPSTREAM_FORWARD, `forward . ${servers}`).replaceAll(PLACEHOLDER.upstreamServers, servers);
  }
  if (values.clusterDns !== undefined) text = text.replaceAll(PLACEHOLDER.clusterDns, values.clusterDns);
  const binds = values.localIps.join(' ');
  text = text.replaceAll(PLACEHOLDER.localDns, binds).replaceAll(PLACEHOLDER.dnsServer, '');
  const stubs = [...values.kubeDns.stubDomains].map(
    ([domain, servers]) =>
      `\n${domain}:${values.port} {\n    errors\n    cache 30\n    bind ${binds}\n    forward . ${servers.map(hostPortText).join(' ')}\n}\n`,
  );
  return text + stubs.join('');
}
