import type { KubeObject, ResourceKind } from './resources.js';

// Server-side printing (the meta.k8s.io Table kubectl asks for): the columns kube-apiserver's
// printers give each kind, so `kubectl get svc` shows TYPE, CLUSTER-IP and PORT(S), and `-o wide`
// the priority-1 columns too.

interface Column {
  name: string;
  type: 'string' | 'integer';
  priority?: number;
  cell: (o: KubeObject, now: number) => string | number;
}

// biome-ignore lint/suspicious/noExplicitAny: API objects are untyped JSON; the printers read optional fields of them.
type Any = Record<string, any>;
const spec = (o: KubeObject) => (o.spec ?? {}) as Any;

/** kube's HumanDuration: 45s, 3m20s, 5h10m, 7d, 2y. */
export function humanAge(fromIso: string | undefined, now: number): string {
  if (!fromIso) return '<unknown>';
  const s = Math.max(0, Math.floor((now - Date.parse(fromIso)) / 1000));
  if (s < 120) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 10) return s % 60 ? `${m}m${s % 60}s` : `${m}m`;
  if (m < 180) return `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 8) return m % 60 ? `${h}h${m % 60}m` : `${h}h`;
  if (h < 48) return `${h}h`;
  const d = Math.floor(h / 24);
  if (d < 365 * 2) return d < 8 && h % 24 ? `${d}d${h % 24}h` : `${d}d`;
  return `${Math.floor(d / 365)}y`;
}

const name: Column = { name: 'Name', type: 'string', cell: (o) => o.metadata.name };
const age: Column = { name: 'Age', type: 'string', cell: (o, now) => humanAge(o.metadata.creationTimestamp, now) };

const servicePorts = (o: KubeObject) => {
  const ports = (spec(o).ports ?? []) as Any[];
  if (ports.length === 0) return '<none>';
  return ports.map((p) => `${p.port}${p.nodePort ? `:${p.nodePort}` : ''}/${p.protocol ?? 'TCP'}`).join(',');
};
const externalIp = (o: KubeObject) => {
  const s = spec(o);
  if (s.type === 'ExternalName') return s.externalName ?? '<none>';
  const ips = [...(s.externalIPs ?? []), ...((o.status as Any)?.loadBalancer?.ingress ?? []).map((i: Any) => i.ip)];
  if (ips.length) return ips.join(',');
  return s.type === 'LoadBalancer' ? '<pending>' : '<none>';
};
const selector = (o: KubeObject) => {
  const sel = spec(o).selector as Record<string, string> | undefined;
  return sel && Object.keys(sel).length
    ? Object.entries(sel)
        .map(([k, v]) => `${k}=${v}`)
        .join(',')
    : '<none>';
};
const firstThree = (list: string[]) =>
  list.length === 0
    ? '<none>'
    : list.length <= 3
      ? list.join(',')
      : `${list.slice(0, 3).join(',')} + ${list.length - 3} more...`;

const COLUMNS: Record<string, Column[]> = {
  Namespace: [name, { name: 'Status', type: 'string', cell: (o) => (o.status as Any)?.phase ?? 'Active' }, age],
  Service: [
    name,
    { name: 'Type', type: 'string', cell: (o) => spec(o).type ?? 'ClusterIP' },
    {
      name: 'Cluster-IP',
      type: 'string',
      cell: (o) => (spec(o).type === 'ExternalName' ? '<none>' : (spec(o).clusterIP ?? '<none>')),
    },
    { name: 'External-IP', type: 'string', cell: externalIp },
    { name: 'Port(s)', type: 'string', cell: servicePorts },
    age,
    { name: 'Selector', type: 'string', priority: 1, cell: selector },
  ],
  Endpoints: [
    name,
    {
      name: 'Endpoints',
      type: 'string',
      cell: (o) =>
        firstThree(
          ((o.subsets ?? []) as Any[]).flatMap((s) =>
            ((s.addresses ?? []) as Any[]).flatMap((a) =>
              ((s.ports ?? [{}]) as Any[]).map((p) => (p.port ? `${a.ip}:${p.port}` : a.ip)),
            ),
          ),
        ),
    },
    age,
  ],
  EndpointSlice: [
    name,
    { name: 'AddressType', type: 'string', cell: (o) => String(o.addressType ?? '') },
    {
      name: 'Ports',
      type: 'string',
      cell: (o) => {
        const ports = (o.ports ?? []) as Any[];
        return ports.length ? ports.map((p) => String(p.port ?? '<unset>')).join(',') : '<unset>';
      },
    },
    {
      name: 'Endpoints',
      type: 'string',
      cell: (o) => firstThree(((o.endpoints ?? []) as Any[]).flatMap((e) => (e.addresses ?? []) as string[])),
    },
    age,
  ],
  Pod: [
    name,
    {
      name: 'Ready',
      type: 'string',
      cell: (o) => {
        const statuses = ((o.status as Any)?.containerStatuses ?? []) as Any[];
        const total = ((spec(o).containers ?? []) as Any[]).length || statuses.length;
        return `${statuses.filter((c) => c.ready).length}/${total}`;
      },
    },
    { name: 'Status', type: 'string', cell: (o) => (o.status as Any)?.phase ?? 'Pending' },
    {
      name: 'Restarts',
      type: 'integer',
      cell: (o) =>
        (((o.status as Any)?.containerStatuses ?? []) as Any[]).reduce((n, c) => n + (c.restartCount ?? 0), 0),
    },
    age,
    { name: 'IP', type: 'string', priority: 1, cell: (o) => (o.status as Any)?.podIP ?? '<none>' },
    { name: 'Node', type: 'string', priority: 1, cell: (o) => spec(o).nodeName ?? '<none>' },
    {
      name: 'Nominated Node',
      type: 'string',
      priority: 1,
      cell: (o) => (o.status as Any)?.nominatedNodeName ?? '<none>',
    },
    { name: 'Readiness Gates', type: 'string', priority: 1, cell: () => '<none>' },
  ],
  ConfigMap: [
    name,
    {
      name: 'Data',
      type: 'integer',
      cell: (o) => Object.keys((o.data ?? {}) as object).length + Object.keys((o.binaryData ?? {}) as object).length,
    },
    age,
  ],
};

/** True when the Accept header asks for a Table (kubectl get sends `as=Table;g=meta.k8s.io`). */
export const wantsTable = (accept: string | undefined) =>
  /as=Table/.test(accept ?? '') && /g=meta\.k8s\.io/.test(accept ?? '');

/** The Table of `objects`, with each row's object as PartialObjectMetadata (or whole, as asked). */
export function toTable(
  kind: ResourceKind,
  objects: readonly KubeObject[],
  resourceVersion: string,
  includeObject: string | null,
  now = Date.now(),
) {
  const columns = COLUMNS[kind.kind] ?? [name, age];
  return {
    kind: 'Table',
    apiVersion: 'meta.k8s.io/v1',
    metadata: { resourceVersion },
    columnDefinitions: columns.map((c) => ({
      name: c.name,
      type: c.type,
      format: c === name ? 'name' : '',
      description: c.name,
      priority: c.priority ?? 0,
    })),
    rows: objects.map((o) => ({
      cells: columns.map((c) => c.cell(o, now)),
      object:
        includeObject === 'Object'
          ? o
          : includeObject === 'None'
            ? undefined
            : { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: o.metadata },
    })),
  };
}
