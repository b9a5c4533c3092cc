import { ENDPOINT, type EndpointGroup, type ServiceInfo, type ServicePort } from './cluster-model.js';

/** One endpoint as the API describes it, before packing. */
export interface EndpointInput {
  readonly addresses: readonly string[];
  readonly ready: boolean;
  readonly terminating: boolean;
  readonly hostname: string | undefined;
}

export interface GroupMeta {
  readonly namespace: string;
  readonly name: string;
  readonly serviceName: string;
  readonly ports: readonly ServicePort[];
  readonly triggerTimeMs?: number;
}

/** Packs endpoints into an EndpointGroup's arrays. Endpoints without an address are left out. */
export function packEndpointGroup(meta: GroupMeta, endpoints: readonly EndpointInput[]): EndpointGroup {
  const kept = endpoints.filter((e) => e.addresses.length > 0);
  const flags = new Uint8Array(kept.length);
  const starts = new Uint32Array(kept.length + 1);
  const addresses: string[] = [];
  let hostnames: (string | null)[] | undefined;
  kept.forEach((e, i) => {
    flags[i] = (e.ready ? ENDPOINT.READY : 0) | (e.terminating ? ENDPOINT.TERMINATING : 0);
    starts[i] = addresses.length;
    addresses.push(...e.addresses);
    if (e.hostname) {
      hostnames ??= Array<string | null>(kept.length).fill(null);
      hostnames[i] = e.hostname;
    }
  });
  starts[kept.length] = addresses.length;
  return {
    namespace: meta.namespace,
    name: meta.name,
    serviceName: meta.serviceName,
    ports: meta.ports,
    count: kept.length,
    flags,
    starts,
    addresses,
    hostnames,
    triggerTimeMs: meta.triggerTimeMs ?? 0,
  };
}

/** The addresses of endpoint i. */
export function addressesOf(group: EndpointGroup, i: number): readonly string[] {
  return group.addresses.slice(group.starts[i], group.starts[i + 1]);
}

/**
 * Whether DNS publishes endpoint i of a Service: ready ones, or with publishNotReady every one that
 * is not terminating (a ready terminating one too).
 */
export function isPublished(service: ServiceInfo, group: EndpointGroup, i: number): boolean {
  const f = group.flags[i] as number;
  const ready = (f & ENDPOINT.READY) !== 0;
  return service.publishNotReady ? ready || (f & ENDPOINT.TERMINATING) === 0 : ready;
}

/**
 * The label of endpoint i under its Service: its hostname, or its first address with dashes
 * (`10-244-1-11`, `fd00--1`) as CoreDNS does: stable for the endpoint's life and resolvable.
 */
export function endpointLabel(group: EndpointGroup, i: number): string {
  return group.hostnames?.[i] ?? (group.addresses[group.starts[i] as number] as string).replace(/[.:]/g, '-');
}

/**
 * `next` holding the previous group's arrays and strings wherever they are equal. An update arrives
 * as a structured clone, all of it new in the main thread's heap; a readiness flip changes one
 * flag of a hundred endpoints, so without this every address of the slice would be kept again,
 * surviving young collections and being promoted, which is what made churn pause the main thread.
 */
export function reuseUnchanged(previous: EndpointGroup | undefined, next: EndpointGroup): EndpointGroup {
  if (!previous) return next;
  return {
    ...next,
    ports: samePorts(previous.ports, next.ports) ? previous.ports : next.ports,
    starts: sameNumbers(previous.starts, next.starts) ? previous.starts : next.starts,
    flags: sameNumbers(previous.flags, next.flags) ? previous.flags : next.flags,
    addresses: reuseStrings(previous.addresses, next.addresses) as string[],
    hostnames: next.hostnames && previous.hostnames ? reuseStrings(previous.hostnames, next.hostnames) : next.hostnames,
  };
}

function reuseStrings<T extends string | null>(previous: readonly T[], next: readonly T[]): readonly T[] {
  let same = previous.length === next.length;
  for (let i = 0; same && i < next.length; i++) same = previous[i] === next[i];
  if (same) return previous;
  return next.map((value, i) => (previous[i] === value ? (previous[i] as T) : value));
}

function sameNumbers(a: ArrayLike<number>, b: ArrayLike<number>): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function samePorts(a: readonly ServicePort[], b: readonly ServicePort[]): boolean {
  return (
    a.length === b.length &&
    a.every((p, i) => p.name === b[i]?.name && p.port === b[i]?.port && p.protocol === b[i]?.protocol)
  );
}
