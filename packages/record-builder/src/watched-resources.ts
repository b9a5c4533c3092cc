import type { ResourceName } from './api-feed-protocol.js';

export type { ResourceName };

/** What the record-builder watches for these options: the RBAC rules must cover exactly this. */
export function watchedResources(options: {
  endpointsApi: 'endpointslices' | 'endpoints';
  pods: string;
  nodeCacheDiscovery?: unknown;
}): ResourceName[] {
  const resources: ResourceName[] = ['services', options.endpointsApi === 'endpoints' ? 'endpoints' : 'endpointslices'];
  if (options.pods === 'verified') resources.push('pods');
  // The node-local DaemonSet's pods, by label in one namespace (--node-cache-selector).
  if (options.nodeCacheDiscovery) resources.push('node-caches');
  return resources;
}
