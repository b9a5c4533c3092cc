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
        s.oneOf(s.count(1, 1, 'ignore empty_service')[0], ['empty_service'] as const, 'what is ignored');
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
        const [url] = s.count(1, 1, 'endpoint URL');
        if (!/^https?:\/\//.test(url as string)) s.fail(`expected an http(s) URL, got ${JSON.stringify(url)}`);
        endpoint = url;
        break;
      }
      case 'multicluster':
        multicluster.push(...s.zones(s.count(1, 16, 'multicluster ZONES...')));
        break;
      default:
        s.fail(`"${d.name}" is not supported (${OPTIONS} are)`);
    }
  }
  return {
    zones: a.directive.args.length ? a.zones(a.directive.args) : undefined,
    pods,
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
