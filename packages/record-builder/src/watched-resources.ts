import type { ResourceName } from './api-feed-protocol.js';

export type { ResourceName };

/** What the record-builder watches for these options: the RBAC rules must cover exactly this. */
export function watchedResources(options: {
  endpointsApi: 'endpointslices' | 'endpoints';
  pods: string;
}): ResourceName[] {
  const resources: ResourceName[] = ['services', options.endpointsApi === 'endpoints' ? 'endpoints' : 'endpointslices'];
  if (options.pods === 'verified') resources.push('pods');
  return resources;
}
