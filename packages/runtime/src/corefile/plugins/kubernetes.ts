import type { Fqdn } from '@cluster-dns/wire';
import type { DirectiveArgs } from '../args.js';

/** `kubernetes` (coredns/coredns plugin/kubernetes), the options we take. */
export interface KubernetesConfig {
  /** The zones it is authoritative for; undefined: the block's. */
  readonly zones: readonly Fqdn[] | undefined;
  readonly pods: 'disabled' | 'insecure' | 'verified';
  /** Answers' TTL and the SOA minimum: CoreDNS's default is 5 s. */
  readonly ttlSeconds: number;
  /** `namespaces NS...`: only these are answered; undefined: every namespace. */
  readonly namespaces: readonly string[] | undefined;
  /** `ignore empty_service`: a ClusterIP Service with no ready endpoint is NXDOMAIN. */
  readonly ignoreEmptyService: boolean;
  /** `endpoint_pod_names`: an endpoint without a hostname is named after its pod. */
  readonly endpointPodNames: boolean;
  /** `fallthrough [ZONES]`: NXDOMAIN in these zones goes on to the next plugin ([] = every zone); undefined: none. */
  readonly fallthrough: readonly Fqdn[] | undefined;
  /** `kubeconfig FILE [CONTEXT]`. */
  readonly kubeconfig: { readonly file: string; readonly context: string | undefined } | undefined;
  /** `endpoint URL`: the API server (ignored with kubeconfig, as CoreDNS does). */
  readonly endpoint: string | undefined;
  /** `multicluster ZONES`: the Multi-Cluster Services zones (KEP-1645), such as clusterset.local. */
  readonly multicluster: readonly Fqdn[];
  /** `startup_timeout`: how long to wait for the first list before serving (the record-builder's --initial-sync-timeout). */
  readonly startupTimeoutMs: number | undefined;
  readonly line: number;
}

const OPTIONS =
  'pods, ttl, namespaces, ignore empty_service, endpoint_pod_names, fallthrough, kubeconfig, endpoint and multicluster';

export function setupKubernetes(a: DirectiveArgs): KubernetesConfig {
  let pods: KubernetesConfig['pods'] = 'disabled';
  let ttlSeconds = 5;
  let namespaces: string[] | undefined;
  let ignoreEmptyService = false;
  let endpointPodNames = false;
  let fallthrough: Fqdn[] | undefined;
  let kubeconfig: KubernetesConfig['kubeconfig'];
  let endpoint: string | undefined;
  const multicluster: Fqdn[] = [];
  let startupTimeoutMs: number | undefined;
  for (const d of a.directive.block ?? []) {
    const s = a.sub(d);
    switch (d.name) {
      case 'pods': {
        pods = s.oneOf(
          s.count(1, 1, 'pods disabled|insecure|verified')[0],
          ['disabled', 'insecure', 'verified'] as const,
          'the pods mode',
        );
        break;
      }
      case 'ttl':
        ttlSeconds = s.integer(s.count(1, 1, 'ttl TTL')[0], 'TTL', 0, 3600);
        break;
      case 'namespaces':
        namespaces = [...s.count(1, 1000, 'namespaces NAMESPACE...')];
        break;
      case 'ignore': {
        const [what, ...more] = s.count(1, 16, 'ignore empty_service');
        s.oneOf(what, ['empty_service'] as const, 'what is ignored');
        // CoreDNS reads the first word only.
        if (more.length) s.warn(`the words after empty_service are ignored: ${more.join(' ')}`);
        ignoreEmptyService = true;
        break;
      }
      case 'endpoint_pod_names':
        s.count(0, 0, 'endpoint_pod_names');
        endpointPodNames = true;
        break;
      case 'fallthrough':
        fallthrough = s.zones(d.args);
        break;
      case 'kubeconfig': {
        const [file, context] = s.count(1, 2, 'kubeconfig KUBECONFIG [CONTEXT]');
        kubeconfig = { file: file as string, context };
        break;
      }
      case 'endpoint': {
        const [url] = s.count(1, 4, 'endpoint URL');
        if (!/^https?:\/\//.test(url as string)) s.fail(`expected an http(s) URL, got ${JSON.stringify(url)}`);
        endpoint = url;
        break;
      }
      case 'multicluster':
        multicluster.push(...s.zones(s.count(1, 16, 'multicluster ZONES...')));
        break;
      case 'upstream':
        // Removed in CoreDNS 1.7 (kubeadm 1.11–1.16 Corefiles still carry it): ExternalName targets
        // are resolved through the forwarder's chain whatever it says.
        s.warn(
          'upstream was removed in CoreDNS 1.7 and is ignored: ExternalName targets are resolved through the chain',
        );
        break;
      case 'apiserver_qps':
      case 'apiserver_burst':
      case 'apiserver_max_inflight': {
        const [raw] = s.count(1, 1, `${d.name} N`);
        if (!/^\d+(\.\d+)?$/.test(raw as string))
          s.fail(`${d.name} must be a non-negative number, got ${JSON.stringify(raw)}`);
        s.warn(`${d.name} is ignored: the record-builder lists once and then watches, it does not poll the API`);
        break;
      }
      case 'startup_timeout':
        startupTimeoutMs = s.durationMs(s.count(1, 1, 'startup_timeout DURATION')[0], 'DURATION');
        break;
      case 'labels':
      case 'namespace_labels':
      case 'noendpoints':
      case 'zonal':
        s.fail(`"${d.name}" is not supported here (docs/corefile.md lists the kubernetes options that are)`);
        break;
      default:
        s.fail(`"${d.name}" is not supported (${OPTIONS} are)`);
    }
  }
  if (multicluster.length && a.directive.args.length) {
    const zones = a.zones(a.directive.args);
    for (const z of multicluster) if (!zones.includes(z)) a.fail(`multicluster: ${z} is not one of the plugin's zones`);
  }
  return {
    // A zone named twice is one zone (RKE2's `kubernetes cluster.local cluster.local in-addr.arpa …`).
    zones: a.directive.args.length ? [...new Set(a.zones(a.directive.args))] : undefined,
    pods,
    startupTimeoutMs,
    ttlSeconds,
    namespaces,
    ignoreEmptyService,
    endpointPodNames,
    fallthrough,
    kubeconfig,
    endpoint,
    multicluster,
    line: a.directive.line,
  };
}
