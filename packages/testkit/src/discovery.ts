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
      return { kind: 'APIGroupList', apiVersion: 'v1', groups: apiGroups().map(apiGroup) };
    default: {
      // `/apis/<group>` and `/apis/<group>/<version>`, for every group the server speaks.
      const [, apis, group, version, ...rest] = path.split('/');
      if (apis !== 'apis' || !group || rest.length || !apiGroups().includes(group)) return undefined;
      if (version === undefined) return { kind: 'APIGroup', apiVersion: 'v1', ...apiGroup(group) };
      const gv = `${group}/${version}`;
      const kinds = RESOURCE_KINDS.filter((k) => apiVersionOf(k) === gv);
      return kinds.length ? resourceList(gv, kinds) : undefined;
    }
  }
}

/** The API groups other than the core one, in the order the server lists its kinds. */
const apiGroups = () => [...new Set(RESOURCE_KINDS.filter((k) => k.group !== '').map((k) => k.group))];

/** A group as discovery names it, with its one version preferred. */
function apiGroup(name: string) {
  const versions = [...new Set(RESOURCE_KINDS.filter((k) => k.group === name).map((k) => k.version))].map(
    (version) => ({ groupVersion: `${name}/${version}`, version }),
  );
  return { name, versions, preferredVersion: versions[0] };
}
