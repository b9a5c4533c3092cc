import { apiVersionOf, RESOURCE_KINDS, type ResourceKind } from './resources.js';

function resourceList(groupVersion: string, kinds: readonly ResourceKind[]) {
  return {
    kind: 'APIResourceList',
    apiVersion: 'v1',
    groupVersion,
    resources: kinds.map((k) => ({
      name: k.plural,
      singularName: k.kind.toLowerCase(),
      namespaced: k.namespaced,
      kind: k.kind,
      verbs: ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'],
      shortNames: k.shortNames,
    })),
  };
}

/** The discovery documents clients ask for before they list (kubectl, client libraries). */
export function discoveryDocument(pathname: string): unknown {
  const path = pathname.replace(/\/+$/, '') || '/';
  switch (path) {
    case '/version':
      return { major: '1', minor: '34', gitVersion: 'v1.34.0-testkit', platform: 'linux/amd64' };
    case '/healthz':
    case '/readyz':
    case '/livez':
      return 'ok';
    case '/api':
      return { kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [] };
    case '/api/v1':
      return resourceList(
        'v1',
        RESOURCE_KINDS.filter((k) => k.group === ''),
      );
    case '/apis':
      return {
        kind: 'APIGroupList',
        apiVersion: 'v1',
        groups: [
          {
            name: 'discovery.k8s.io',
            versions: [{ groupVersion: 'discovery.k8s.io/v1', version: 'v1' }],
            preferredVersion: { groupVersion: 'discovery.k8s.io/v1', version: 'v1' },
          },
        ],
      };
    case '/apis/discovery.k8s.io':
      return {
        kind: 'APIGroup',
        apiVersion: 'v1',
        name: 'discovery.k8s.io',
        versions: [{ groupVersion: 'discovery.k8s.io/v1', version: 'v1' }],
        preferredVersion: { groupVersion: 'discovery.k8s.io/v1', version: 'v1' },
      };
    case '/apis/discovery.k8s.io/v1':
      return resourceList(
        'discovery.k8s.io/v1',
        RESOURCE_KINDS.filter((k) => apiVersionOf(k) === 'discovery.k8s.io/v1'),
      );
    default:
      return undefined;
  }
}
