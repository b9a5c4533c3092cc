import type { EndpointGroup, ServiceInfo } from './cluster-model.js';
import { buildServiceRecords, type RecordSet } from './service-records.js';
import { nameServerName, nameServerRecords } from './zone-records.js';
import type { ZoneView } from './zone-view.js';

/**
 * Every record one Service puts in the zones, by name: its own names and PTRs, and `ns.dns.<zone>`
 * when it is the DNS Service (`--dns-service`).
 */
export function ownerRecords(
  view: ZoneView,
  service: ServiceInfo | undefined,
  groups: readonly EndpointGroup[],
): RecordSet {
  if (!service) return new Map();
  const set = buildServiceRecords(service, groups, view);
  const dns = view.dnsService;
  if (dns && !service.clusterset && dns.namespace === service.namespace && dns.name === service.name) {
    const rrs = nameServerRecords(view, service.clusterIPs);
    if (rrs.length) set.set(nameServerName(view), rrs);
  }
  return set;
}
