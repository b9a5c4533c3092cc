import type { Fqdn } from '@cluster-dns/wire';
import type { ClusterState } from './cluster-state.js';
import type { ExternalZone } from './external-records.js';
import type { PodsMode } from './pod-records.js';
import type { RecordContext } from './service-records.js';

/** What answers are built from: the zones served, their TTL and options, and the store. */
export interface ZoneView extends RecordContext {
  readonly zone: Fqdn;
  readonly reverseZones: readonly Fqdn[];
  readonly ttlSeconds: number;
  readonly pods: PodsMode;
  /** The Service whose cluster IPs `ns.dns.<zone>` (the NS target) resolves to. */
  readonly dnsService: { namespace: string; name: string } | undefined;
  readonly state: ClusterState;
  /** A Corefile's k8s_external zones (their names only; reverse zones it names are among reverseZones). */
  readonly external?: readonly ExternalZone[];
  /** The reverse zones k8s_external names: an external address's PTR there names its Service. */
  readonly externalReverseZones?: readonly Fqdn[];
}
