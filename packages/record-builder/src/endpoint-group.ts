import { type AddressKey, addressKeyIn } from './address-key.js';
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
  readonly clusterId?: string;
}

/** Packs endpoints into an EndpointGroup's arrays. Endpoints without an address are left out. */
export function packEndpointGroup(meta: GroupMeta, endpoints: readonly EndpointInput[]): EndpointGroup {
  const kept = endpoints.filter((e) => e.addresses.length > 0);
  const count = kept.length;
  let addressCount = 0;
  for (const e of kept) addressCount += e.addresses.length;
  const withHostnames = kept.some((e) => e.hostname);
  // One buffer under every array: each ArrayBuffer costs an allocation, and a tracking object that
  // V8 sweeps, in both threads for every update that crosses from the API worker.
  const words = count + 1 + addressCount + 1 + (withHostnames ? count + 1 : 0);
  const buffer = new ArrayBuffer(words * 4 + count);
  const starts = new Uint32Array(buffer, 0, count + 1);
  const addressAt = new Uint32Array(buffer, (count + 1) * 4, addressCount + 1);
  const hostnameAt = withHostnames ? new Uint32Array(buffer, (count + addressCount + 2) * 4, count + 1) : undefined;
  const flags = new Uint8Array(buffer, words * 4, count);
  const addressText: string[] = [];
  const hostnameText: string[] = [];
  let a = 0;
  let length = 0;
  let hostnameLength = 0;
  kept.forEach((e, i) => {
    flags[i] = (e.ready ? ENDPOINT.READY : 0) | (e.terminating ? ENDPOINT.TERMINATING : 0);
    starts[i] = a;
    for (const ip of e.addresses) {
      addressAt[a++] = length;
      addressText.push(ip);
      length += ip.length;
    }
    if (hostnameAt) {
      hostnameAt[i] = hostnameLength;
      hostnameText.push(e.hostname ?? '');
      hostnameLength += e.hostname?.length ?? 0;
    }
  });
  starts[count] = a;
  addressAt[a] = length;
  if (hostnameAt) hostnameAt[count] = hostnameLength;
  return {
    namespace: meta.namespace,
    name: meta.name,
    serviceName: meta.serviceName,
    ports: meta.ports,
    count,
    flags,
    starts,
    addressText: addressText.join(''),
    addressAt,
    hostnameText: hostnameText.join(''),
    hostnameAt,
    triggerTimeMs: meta.triggerTimeMs ?? 0,
    ...(meta.clusterId === undefined ? {} : { clusterId: meta.clusterId }),
  };
}

/** Address a of the group (numbered as `starts` numbers them). */
export function addressAt(group: EndpointGroup, a: number): string {
  return group.addressText.slice(group.addressAt[a], group.addressAt[a + 1]);
}

/** Address a of the group as the reverse index keys it (address-key.ts), read in place. */
export function addressKeyAt(group: EndpointGroup, a: number): AddressKey {
  return addressKeyIn(group.addressText, group.addressAt[a] as number, group.addressAt[a + 1] as number);
}

/** Whether `text.slice(from, to)` is `word`, without making that slice. */
function spells(text: string, from: number, to: number, word: string): boolean {
  return to - from === word.length && text.startsWith(word, from);
}

/** The addresses of endpoint i. */
export function addressesOf(group: EndpointGroup, i: number): string[] {
  const out: string[] = [];
  for (let a = group.starts[i] as number; a < (group.starts[i + 1] as number); a++) out.push(addressAt(group, a));
  return out;
}

/** Whether endpoint i has the address `ip` (canonical text), compared in place. */
export function hasAddress(group: EndpointGroup, i: number, ip: string): boolean {
  for (let a = group.starts[i] as number; a < (group.starts[i + 1] as number); a++)
    if (spells(group.addressText, group.addressAt[a] as number, group.addressAt[a + 1] as number, ip)) return true;
  return false;
}

/** Endpoint i's hostname, or undefined when it has none. */
export function hostnameOf(group: EndpointGroup, i: number): string | undefined {
  const at = group.hostnameAt;
  if (!at || at[i] === at[i + 1]) return undefined;
  return group.hostnameText.slice(at[i], at[i + 1]);
}

/** Whether endpoint i has a hostname (no string made). */
export function hasHostname(group: EndpointGroup, i: number): boolean {
  const at = group.hostnameAt;
  return at !== undefined && at[i] !== at[i + 1];
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
 * (`10-244-1-11`, `fd00--1`) as CoreDNS does: stable for the endpoint's life and resolvable. An
 * imported endpoint's is followed by its cluster's id (`pg-0.cluster-a`, KEP-1645 §2.4).
 */
export function endpointLabel(group: EndpointGroup, i: number): string {
  const own = hostnameOf(group, i) ?? addressAt(group, group.starts[i] as number).replace(/[.:]/g, '-');
  return group.clusterId === undefined ? own : `${own}.${group.clusterId}`;
}

/** Whether endpoint i's label is `label`: a hostname is compared in place, with no string made. */
export function hasLabel(group: EndpointGroup, i: number, label: string): boolean {
  const at = group.hostnameAt;
  if (group.clusterId === undefined && at && at[i] !== at[i + 1])
    return spells(group.hostnameText, at[i] as number, at[i + 1] as number, label);
  return endpointLabel(group, i) === label;
}

/** The name a PTR of endpoint i points under its Service: its hostname (and an import's cluster id), if it has one. */
export function ptrLabelOf(group: EndpointGroup, i: number): string | undefined {
  const hostname = hostnameOf(group, i);
  if (hostname === undefined || group.clusterId === undefined) return hostname;
  return `${hostname}.${group.clusterId}`;
}

/**
 * `next` holding the previous group's strings and ports wherever they are equal. An update arrives
 * as a structured clone, all of it new in the main thread's heap; a readiness flip changes one
 * flag of a hundred endpoints, so without this the slice's texts would be kept again, surviving
 * young collections and being promoted, which is what made churn pause the main thread. Equal
 * text is equal text whatever the offsets into it, so the offsets are always next's (its arrays
 * share one buffer: keeping some of the previous ones would keep two).
 */
export function reuseUnchanged(previous: EndpointGroup | undefined, next: EndpointGroup): EndpointGroup {
  if (!previous) return next;
  return {
    ...next,
    ports: samePorts(previous.ports, next.ports) ? previous.ports : next.ports,
    addressText: previous.addressText === next.addressText ? previous.addressText : next.addressText,
    hostnameText: previous.hostnameText === next.hostnameText ? previous.hostnameText : next.hostnameText,
  };
}

function samePorts(a: readonly ServicePort[], b: readonly ServicePort[]): boolean {
  return (
    a.length === b.length &&
    a.every((p, i) => p.name === b[i]?.name && p.port === b[i]?.port && p.protocol === b[i]?.protocol)
  );
}
