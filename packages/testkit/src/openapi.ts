import { createHash } from 'node:crypto';
import { apiVersionOf, RESOURCE_KINDS, type ResourceKind } from './resources.js';

// OpenAPI v3 documents for the kinds testkit holds, as kube-apiserver serves them under
// /openapi/v3: kubectl reads them to validate what it applies and to learn that the server does
// its own field validation (the `fieldValidation` query parameter), and `kubectl explain` reads
// them too. Schemas cover the fields DNS and everyday kubectl use need; the rest of a Pod's spec is
// left open (x-kubernetes-preserve-unknown-fields).

type Schema = Record<string, unknown>;
const str = { type: 'string' };
const int = { type: 'integer', format: 'int32' };
const bool = { type: 'boolean' };
const strMap = { type: 'object', additionalProperties: str };
const arrayOf = (items: Schema, extra: Schema = {}) => ({ type: 'array', items, ...extra });
const ref = (name: string) => ({ allOf: [{ $ref: `#/components/schemas/${name}` }] });
const object = (properties: Record<string, Schema>, extra: Schema = {}) => ({ type: 'object', properties, ...extra });

const SHARED: Record<string, Schema> = {
  'io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta': object({
    name: str,
    generateName: str,
    namespace: str,
    uid: str,
    resourceVersion: str,
    generation: { type: 'integer', format: 'int64' },
    creationTimestamp: { type: 'string', format: 'date-time' },
    deletionTimestamp: { type: 'string', format: 'date-time' },
    labels: strMap,
    annotations: strMap,
    finalizers: arrayOf(str),
    ownerReferences: arrayOf(
      object({ apiVersion: str, kind: str, name: str, uid: str, controller: bool, blockOwnerDeletion: bool }),
      { 'x-kubernetes-patch-merge-key': 'uid', 'x-kubernetes-patch-strategy': 'merge' },
    ),
    managedFields: arrayOf({ type: 'object', 'x-kubernetes-preserve-unknown-fields': true }),
  }),
};

const servicePort = object({
  name: str,
  protocol: str,
  appProtocol: str,
  port: int,
  targetPort: { 'x-kubernetes-int-or-string': true },
  nodePort: int,
});

/** The schema of each kind's own fields (apiVersion, kind and metadata are added to all). */
const KIND_FIELDS: Record<string, Record<string, Schema>> = {
  Namespace: { spec: object({ finalizers: arrayOf(str) }), status: object({ phase: str }) },
  Service: {
    spec: object({
      type: str,
      clusterIP: str,
      clusterIPs: arrayOf(str),
      ipFamilies: arrayOf(str),
      ipFamilyPolicy: str,
      externalName: str,
      externalIPs: arrayOf(str),
      selector: strMap,
      ports: arrayOf(servicePort, {
        'x-kubernetes-patch-merge-key': 'port',
        'x-kubernetes-patch-strategy': 'merge',
        'x-kubernetes-list-type': 'map',
        'x-kubernetes-list-map-keys': ['port', 'protocol'],
      }),
      publishNotReadyAddresses: bool,
      sessionAffinity: str,
      internalTrafficPolicy: str,
      externalTrafficPolicy: str,
      loadBalancerIP: str,
    }),
    status: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
  },
  Endpoints: {
    subsets: arrayOf(
      object({
        addresses: arrayOf(
          object({
            ip: str,
            hostname: str,
            nodeName: str,
            targetRef: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
          }),
        ),
        notReadyAddresses: arrayOf(
          object({
            ip: str,
            hostname: str,
            nodeName: str,
            targetRef: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
          }),
        ),
        ports: arrayOf(object({ name: str, port: int, protocol: str, appProtocol: str })),
      }),
    ),
  },
  EndpointSlice: {
    addressType: str,
    endpoints: arrayOf(
      object({
        addresses: arrayOf(str),
        conditions: object({ ready: bool, serving: bool, terminating: bool }),
        hostname: str,
        nodeName: str,
        zone: str,
        targetRef: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
        hints: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
      }),
      { 'x-kubernetes-list-type': 'atomic' },
    ),
    ports: arrayOf(object({ name: str, port: int, protocol: str, appProtocol: str }), {
      'x-kubernetes-list-type': 'atomic',
    }),
  },
  Pod: {
    spec: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
    status: object(
      { phase: str, podIP: str, podIPs: arrayOf(object({ ip: str })), hostIP: str },
      { 'x-kubernetes-preserve-unknown-fields': true },
    ),
  },
  ConfigMap: { data: strMap, binaryData: strMap, immutable: bool },
  ServiceCIDR: {
    spec: object({ cidrs: arrayOf(str, { 'x-kubernetes-list-type': 'atomic' }) }),
    status: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
  },
  // sigs.k8s.io/mcs-api v1alpha1: the fields DNS reads.
  ServiceImport: {
    spec: object(
      {
        type: str,
        ips: arrayOf(str),
        ports: arrayOf(object({ name: str, port: int, protocol: str, appProtocol: str }), {
          'x-kubernetes-list-type': 'atomic',
        }),
      },
      { 'x-kubernetes-preserve-unknown-fields': true },
    ),
    status: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
  },
};

export const schemaName = (k: ResourceKind) =>
  k.group === ''
    ? `io.k8s.api.core.${k.version}.${k.kind}`
    : `io.k8s.api.${k.group.split('.')[0]}.${k.version}.${k.kind}`;

/** A kind's schema, as kubectl and the server's own validation read it. */
export function kindSchema(k: ResourceKind): Schema {
  return object(
    {
      apiVersion: str,
      kind: str,
      metadata: ref('io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta'),
      ...(KIND_FIELDS[k.kind] ?? {}),
    },
    { 'x-kubernetes-group-version-kind': [{ group: k.group, version: k.version, kind: k.kind }] },
  );
}

export const sharedSchemas = SHARED;

const groupVersions = () => [...new Set(RESOURCE_KINDS.map(apiVersionOf))];
const docPath = (gv: string) => (gv.includes('/') ? `apis/${gv}` : `api/${gv}`);

/** The query parameters of a write, `fieldValidation` among them: kubectl checks for it. */
const writeParameters = [
  { name: 'fieldValidation', in: 'query', schema: { type: 'string', uniqueItems: true } },
  { name: 'fieldManager', in: 'query', schema: { type: 'string', uniqueItems: true } },
  { name: 'dryRun', in: 'query', schema: { type: 'string', uniqueItems: true } },
];

function groupVersionDocument(gv: string) {
  const kinds = RESOURCE_KINDS.filter((k) => apiVersionOf(k) === gv);
  const paths: Record<string, unknown> = {};
  for (const k of kinds) {
    const base = `/${docPath(gv)}${k.namespaced ? '/namespaces/{namespace}' : ''}/${k.plural}`;
    const gvk = { group: k.group, version: k.version, kind: k.kind };
    const body = { content: { 'application/json': { schema: { $ref: `#/components/schemas/${schemaName(k)}` } } } };
    const op = (action: string, extra: Schema = {}) => ({
      'x-kubernetes-action': action,
      'x-kubernetes-group-version-kind': gvk,
      responses: { '200': body },
      ...extra,
    });
    paths[base] = {
      get: op('list'),
      post: op('post', { requestBody: body, parameters: writeParameters }),
    };
    paths[`${base}/{name}`] = {
      get: op('get'),
      put: op('put', { requestBody: body, parameters: writeParameters }),
      patch: op('patch', {
        requestBody: {
          content: Object.fromEntries(
            [
              'application/apply-patch+yaml',
              'application/json-patch+json',
              'application/merge-patch+json',
              'application/strategic-merge-patch+json',
            ].map((t) => [t, { schema: { type: 'object' } }]),
          ),
        },
        parameters: writeParameters,
      }),
      delete: op('delete'),
    };
  }
  const schemas: Record<string, Schema> = { ...SHARED };
  for (const k of kinds) schemas[schemaName(k)] = kindSchema(k);
  return {
    openapi: '3.0.0',
    info: { title: 'Kubernetes (testkit)', version: 'v1.34.0-testkit' },
    paths,
    components: { schemas },
  };
}

const hashOf = (doc: unknown) =>
  createHash('sha512').update(JSON.stringify(doc)).digest('hex').slice(0, 32).toUpperCase();

/** `/openapi/v3` and `/openapi/v3/<api/v1 | apis/group/version>`, or undefined for other paths. */
export function openApiV3(pathname: string): unknown {
  if (pathname === '/openapi/v3' || pathname === '/openapi/v3/') {
    return {
      paths: Object.fromEntries(
        groupVersions().map((gv) => [
          docPath(gv),
          { serverRelativeURL: `/openapi/v3/${docPath(gv)}?hash=${hashOf(groupVersionDocument(gv))}` },
        ]),
      ),
    };
  }
  const rest = pathname.replace(/^\/openapi\/v3\//, '');
  if (rest === pathname) return undefined;
  const gv = groupVersions().find((g) => docPath(g) === rest);
  return gv ? groupVersionDocument(gv) : undefined;
}

/** Follows `$ref` (directly or through kube's `allOf: [{$ref}]`) to the schema it names. */
function resolve(schema: Schema | undefined): Schema | undefined {
  if (!schema) return undefined;
  const refOf = (s: Schema) => (typeof s.$ref === 'string' ? s.$ref : undefined);
  const direct = refOf(schema) ?? (Array.isArray(schema.allOf) ? refOf(schema.allOf[0] as Schema) : undefined);
  return direct ? SHARED[direct.replace('#/components/schemas/', '')] : schema;
}

/** The schema of the field at `path` (list items stepped into) of an object of `kind`. */
export function schemaAt(kind: ResourceKind, path: readonly string[]): Schema | undefined {
  let schema = resolve(kindSchema(kind));
  for (const key of path) {
    if (!schema) return undefined;
    if (schema.type === 'array') schema = resolve(schema.items as Schema);
    const properties = schema?.properties as Record<string, Schema> | undefined;
    schema = resolve(properties?.[key] ?? (schema?.additionalProperties as Schema | undefined));
  }
  return schema;
}

/** The strategic-merge key of the list at `path`, from the schema (x-kubernetes-patch-merge-key). */
export const mergeKeyAt = (kind: ResourceKind) => (path: readonly string[]) => {
  const schema = schemaAt(kind, path);
  return schema?.['x-kubernetes-patch-strategy'] === 'merge'
    ? (schema['x-kubernetes-patch-merge-key'] as string)
    : undefined;
};

/** Fields of `value` its kind's schema does not declare, as kube reports them (`.spec.foo`). */
export function unknownFields(kind: ResourceKind, value: unknown): string[] {
  const out: string[] = [];
  const walk = (schema: Schema | undefined, v: unknown, at: string) => {
    const s = resolve(schema);
    if (!s || s['x-kubernetes-preserve-unknown-fields'] || v === null || typeof v !== 'object') return;
    if (Array.isArray(v)) {
      if (s.type === 'array')
        v.forEach((item, i) => {
          walk(s.items as Schema, item, `${at}[${i}]`);
        });
      return;
    }
    const properties = s.properties as Record<string, Schema> | undefined;
    for (const [key, child] of Object.entries(v as Record<string, unknown>)) {
      const declared = properties?.[key] ?? (s.additionalProperties as Schema | undefined);
      if (!declared) out.push(`${at}.${key}`);
      else walk(declared, child, `${at}.${key}`);
    }
  };
  walk(kindSchema(kind), value, '');
  return out;
}
