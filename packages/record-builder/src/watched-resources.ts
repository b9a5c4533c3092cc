import type { ResourceName } from './api-feed-protocol.js';

export type { ResourceName };

/** What the record-builder watches for these options: the RBAC rules must cover exactly this. */
export function watchedResources(options: {
  endpointsApi: 'endpointslices' | 'endpoints';
  pods: string;
  nodeCacheDiscovery?: unknown;
  multiclusterZone?: unknown;
  serviceCidrs?: readonly unknown[];
}): ResourceName[] {
  const resources: ResourceName[] = ['services', options.endpointsApi === 'endpoints' ? 'endpoints' : 'endpointslices'];
  if (options.pods === 'verified') resources.push('pods');
  // The clusterset zone's Services (KEP-1645); their imported slices come with the EndpointSlices.
  if (options.multiclusterZone) resources.push('serviceimports');
  // The node-local DaemonSet's pods, by label in one namespace (--node-cache-selector).
  if (options.nodeCacheDiscovery) resources.push('node-caches');
  // The Service CIDRs, whose reverse zones are ours, unless --service-cidr names them.
  if (!options.serviceCidrs?.length) resources.push('servicecidrs');
  return resources;
}
