import type { Fqdn, Rr } from '@cluster-dns/wire';
import type { ClusterState } from './cluster-state.js';
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

/** What is at one name of our zones. */
export interface NameRecords {
  /** Records at the name; undefined or empty when it has none. */
  readonly rrs: Rr[] | undefined;
  /** True when the name exists: records, or names below it (an empty non-terminal: NODATA). */
  readonly exists: boolean;
  /** Services whose change can change what is at this name. */
  readonly owners: readonly string[];
  /**
   * True when this stays valid until one of `owners` changes; false when any change may alter it
   * (the apex with its serial, pods under --pods=verified, existence of names not yet built).
   */
  readonly stable: boolean;
}

/**
 * A Corefile's `k8s_external` zone (CoreDNS's plugin): Services' external addresses (their
 * `externalIPs` and LoadBalancer ingress) at `<svc>.<ns>.<zone>`, with an SRV per port, and, with
 * `headless`, a headless Service's endpoints at its name and at `<endpoint>.<svc>.<ns>.<zone>`.
 */
export interface ExternalZone {
  readonly zone: Fqdn;
  /** The label of the zone's own names: `ns1.<apex>.<zone>` is its name server. */
  readonly apex: string;
  readonly ttlSeconds: number;
  readonly headless: boolean;
}
