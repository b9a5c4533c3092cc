import {
  CorefileError,
  type HostPort,
  type K8sExternalConfig,
  type KubernetesConfig,
  type ReadCorefileOptions,
  readCorefile,
} from '@cluster-dns/runtime';
import { type Fqdn, isInZone, toFqdn } from '@cluster-dns/wire';
import type { ExternalZone } from './external-records.js';
import type { PodsMode } from './pod-records.js';

const REVERSE = [toFqdn('in-addr.arpa'), toFqdn('ip6.arpa')];

/** What a Pod's Corefile sets of the record-builder: its kubernetes plugin, and its ready. */
export interface CorefileRecordBuilder {
  readonly zone: Fqdn;
  readonly pods: PodsMode;
  readonly ttlSeconds: number;
  readonly kubecfgFile: string | undefined;
  readonly kubeContext: string | undefined;
  readonly masterUrl: string | undefined;
  /** `namespaces`: only these are answered; undefined: all. */
  readonly namespaces: readonly string[] | undefined;
  readonly ignoreEmptyService: boolean;
  readonly endpointPodNames: boolean;
  /** `multicluster ZONE`: the clusterset zone (KEP-1645), or undefined. */
  readonly clustersetZone: Fqdn | undefined;
  /** `ready [ADDRESS]`: where /ready answers. */
  readonly ready: HostPort | undefined;
  /** `startup_timeout`: how long the first list is waited for (--initial-sync-timeout). */
  readonly startupTimeoutMs: number | undefined;
  /** Every block's `k8s_external` zones but reverse ones, which are served anyway. */
  readonly external: readonly ExternalZone[];
  /** The reverse zones k8s_external names: PTRs of external addresses there. */
  readonly externalReverseZones: readonly Fqdn[];
}

/**
 * The record-builder's part of a Pod's Corefile (--corefile), read with the one Corefile reader.
 * Its kubernetes plugin names the cluster zone (one zone; the reverse zones are always served, and
 * the forwarder sends it only those the Corefile lists), the clusterset zone of `multicluster`,
 * the pods mode, the TTL, the API server, and the answers' options. Throws CorefileError naming the line.
 */
export function recordBuilderFromCorefile(
  text: string,
  source: string,
  options: Pick<ReadCorefileOptions, 'env' | 'onWarning' | 'files'> = {},
): CorefileRecordBuilder {
  const blocks = readCorefile(text, { ...options, source, mode: 'pod' });
  const found = blocks.flatMap((b) => (b.kubernetes ? [{ block: b, k: b.kubernetes }] : []));
  const first = found[0];
  if (!first) throw new CorefileError(1, 'no kubernetes plugin: Corefile mode needs one to answer the cluster', source);
  const { block, k } = first;
  if (k.multicluster.length > 1)
    throw new CorefileError(
      k.line,
      `kubernetes multicluster: one clusterset zone is supported, got ${k.multicluster.join(' ')}`,
      source,
    );
  const clustersetZone = k.multicluster[0];
  const zones = (k.zones ?? block.keys.map((key) => key.zone)).filter(
    (z) => z !== clustersetZone && !REVERSE.some((r) => isInZone(z, r)),
  );
  if (zones.length !== 1)
    throw new CorefileError(
      k.line,
      `kubernetes: exactly one cluster zone is supported beside the reverse zones, got ${zones.join(' ') || 'none'}`,
      source,
    );
  return {
    zone: zones[0] as Fqdn,
    pods: k.pods,
    ttlSeconds: k.ttlSeconds,
    kubecfgFile: k.kubeconfig?.file,
    kubeContext: k.kubeconfig?.context,
    masterUrl: k.kubeconfig ? undefined : k.endpoint,
    namespaces: k.namespaces,
    ignoreEmptyService: k.ignoreEmptyService,
    endpointPodNames: k.endpointPodNames,
    clustersetZone,
    ready: blocks.find((b) => b.ready)?.ready,
    startupTimeoutMs: k.startupTimeoutMs,
    externalReverseZones: blocks.flatMap((b) =>
      b.k8sExternal
        ? (b.k8sExternal.zones ?? b.keys.map((key) => key.zone)).filter((z) => REVERSE.some((r) => isInZone(z, r)))
        : [],
    ),
    external: blocks.flatMap((b) =>
      b.k8sExternal
        ? (b.k8sExternal.zones ?? b.keys.map((key) => key.zone))
            .filter((z) => !REVERSE.some((r) => isInZone(z, r)))
            .map((z) => ({
              zone: z,
              apex: (b.k8sExternal as K8sExternalConfig).apex.toLowerCase(),
              ttlSeconds: (b.k8sExternal as K8sExternalConfig).ttlSeconds,
              headless: (b.k8sExternal as K8sExternalConfig).headless,
            }))
        : [],
    ),
  };
}

export type { KubernetesConfig };
