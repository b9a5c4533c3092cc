import { Buffer } from 'node:buffer';
import {
  buildQueryMessage,
  createQueryPipeline,
  type DecodedMessage,
  decodeMessage,
  encodeMessage,
  type Fqdn,
  QTYPE,
  type QueryContext,
  type Reply,
  toFqdn,
} from '@cluster-dns/wire';
import type { ZoneView } from './answer-builder.js';
import type { EndpointGroup, ServiceInfo } from './cluster-model.js';
import { ClusterState } from './cluster-state.js';
import { packEndpointGroup } from './endpoint-group.js';
import type { ExternalZone } from './external-records.js';
import type { PodsMode } from './pod-records.js';
import { createResponder, type Responder } from './responder.js';

/** A zone with a responder behind the real query pipeline, for unit tests: no sockets, no watches. */
export function createTestZone(
  options: {
    pods?: PodsMode;
    ready?: boolean;
    transferTo?: string[];
    ttl?: number;
    journalBytes?: number;
    /** A Corefile's kubernetes options: `namespaces`, `ignore empty_service`. */
    exposedNamespaces?: string[];
    ignoreEmptyService?: boolean;
    /** `--multicluster-zone`: the clusterset zone of ServiceImports. */
    clustersetZone?: string;
    /** A Corefile's k8s_external zones. */
    external?: readonly ExternalZone[];
    externalReverseZones?: readonly Fqdn[];
  } = {},
) {
  let ready = options.ready ?? true;
  let responder: Responder | undefined;
  const zone = toFqdn('cluster.local');
  const clusterset = options.clustersetZone ? { clustersetZone: toFqdn(options.clustersetZone) } : {};
  const state = new ClusterState(
    { zone, ...clusterset, reverseZones: [toFqdn('in-addr.arpa'), toFqdn('ip6.arpa')], ttlSeconds: options.ttl ?? 30 },
    (owners) => responder?.invalidate(owners),
    () => 1_700_000_000_000,
  );
  if (options.journalBytes) state.keepJournal(options.journalBytes);
  const view: ZoneView = {
    zone,
    ...clusterset,
    reverseZones: [toFqdn('in-addr.arpa'), toFqdn('ip6.arpa')],
    ttlSeconds: options.ttl ?? 30,
    pods: options.pods ?? 'insecure',
    dnsService: { namespace: 'kube-system', name: 'kube-dns' },
    state,
    ...(options.exposedNamespaces ? { exposedNamespaces: new Set(options.exposedNamespaces) } : {}),
    ...(options.ignoreEmptyService ? { ignoreEmptyService: true } : {}),
    ...(options.external ? { external: options.external } : {}),
    ...(options.externalReverseZones ? { externalReverseZones: options.externalReverseZones } : {}),
  };
  responder = createResponder({
    view,
    isReady: () => ready,
    transferAllowed: (a) => (options.transferTo ?? []).includes(a),
  });
  const pipeline = createQueryPipeline({ handle: responder.handle, recursionAvailable: false });
  // The record-builder answers from memory: its pipeline never returns a promise.
  const handle = (raw: Buffer, context: QueryContext): Reply => {
    const reply = pipeline(raw, context);
    if (reply instanceof Promise) throw new Error('the record-builder answered asynchronously');
    return reply;
  };
  const ask = (
    name: string,
    type: number = QTYPE.A,
    extra: { transport?: 'udp' | 'tcp'; edns?: { udpSize: number }; remote?: string; raw?: Buffer } = {},
  ): DecodedMessage => {
    const raw = extra.raw ?? encodeMessage(buildQueryMessage(4242, name, type, { edns: extra.edns }));
    const reply = handle(raw, {
      transport: extra.transport ?? 'udp',
      remoteAddress: extra.remote ?? '127.0.0.1',
      remotePort: 5000,
      family: 4,
    });
    const first = Buffer.isBuffer(reply) ? reply : [...(reply ?? [])][0];
    if (!first) throw new Error('no reply');
    return decodeMessage(first);
  };
  /** Every message of a reply, a lazy one (a zone transfer) read to its end. */
  const messages = (raw: Buffer, remote = '127.0.0.1', transport: 'udp' | 'tcp' = 'tcp'): Buffer[] => {
    const reply = handle(raw, { transport, remoteAddress: remote, remotePort: 1, family: 4 });
    return Buffer.isBuffer(reply) ? [reply] : [...(reply ?? [])];
  };
  return {
    state,
    view,
    responder,
    handle,
    ask,
    messages,
    setReady: (value: boolean) => {
      ready = value;
    },
  };
}

export const svc = (namespace: string, name: string, over: Partial<ServiceInfo> = {}): ServiceInfo => ({
  namespace,
  name,
  kind: 'cluster-ip',
  clusterIPs: [],
  externalName: undefined,
  ports: [],
  publishNotReady: false,
  ...over,
});

export const group = (
  namespace: string,
  serviceName: string,
  endpoints: Array<{ ip: string; ready?: boolean; hostname?: string; terminating?: boolean }>,
  ports: EndpointGroup['ports'] = [],
  name = `${serviceName}-abc`,
  clusterId?: string,
): EndpointGroup =>
  packEndpointGroup(
    { namespace, name, serviceName, ports, ...(clusterId ? { clusterId } : {}) },
    endpoints.map((e) => ({
      addresses: [e.ip],
      ready: e.ready ?? true,
      terminating: e.terminating ?? false,
      hostname: e.hostname,
    })),
  );
