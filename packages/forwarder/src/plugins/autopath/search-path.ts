import type { Buffer } from 'node:buffer';
import { type Fqdn, QTYPE, RCODE, RCODE_MASK, readName, toFqdn } from '@cluster-dns/wire';
import { clientMapZone } from './client-map.js';

/**
 * The kubelet's search path for a pod with its cluster default (dnsPolicy ClusterFirst, no
 * dnsConfig of its own): `<ns>.svc.<zone> svc.<zone> <zone>`, then the node's own search domains,
 * with ndots:5. Its first step is the name asked with `<ns>.svc.<zone>` after it: that is the
 * question server-side search (autopath) recognises.
 */

/** Server-side search as configured: the cluster zone whose search path is walked, and the node's domains after it. */
export interface AutopathSettings {
  readonly zone: Fqdn;
  readonly extraSearch: readonly Fqdn[];
}

/** The asked name split as the first step of a search walk: what the pod typed, and its namespace. */
export interface FirstStep {
  /** The name before the search suffix, as typed (no trailing dot): `api.example.com`. */
  readonly base: string;
  readonly namespace: string;
}

/**
 * `<base>.<ns>.svc.<zone>` read as a walk's first step, or undefined for any other shape. The
 * namespace is the label before `svc`; `base` is at least one label. Whether the asker is in that
 * namespace is for the caller to check.
 */
export function firstStepOf(name: Fqdn, zone: Fqdn): FirstStep | undefined {
  const suffix = `.svc.${zone}`;
  if (name.length <= suffix.length || !name.endsWith(suffix)) return undefined;
  const rest = name.slice(0, name.length - suffix.length);
  const dot = rest.lastIndexOf('.');
  if (dot <= 0) return undefined;
  return { base: rest.slice(0, dot), namespace: rest.slice(dot + 1) };
}

/**
 * The names a stub would ask after the first step, in its order: the rest of the cluster's
 * search path, the node's domains (`extra`), then the name as typed. ndots:5 is why the typed name
 * comes last: a name with fewer than five dots is tried with every suffix first.
 */
export function restOfWalk(step: FirstStep, zone: Fqdn, extra: readonly Fqdn[]): Fqdn[] {
  const names = [toFqdn(`${step.base}.svc.${zone}`), toFqdn(`${step.base}.${zone}`)];
  for (const domain of extra) names.push(toFqdn(`${step.base}.${domain}`));
  names.push(toFqdn(step.base));
  return names;
}

/** The node's search domains: a resolv.conf's last `search` (or `domain`) line, as the resolver reads it. */
export function searchDomainsOf(resolvConf: string): Fqdn[] {
  let domains: string[] = [];
  for (const line of resolvConf.split('\n')) {
    const m = /^\s*(search|domain)\s+(.+)$/.exec(line);
    if (m) domains = (m[2] as string).trim().split(/\s+/);
  }
  return domains.filter((d) => d !== '.' && d !== '').map((d) => toFqdn(d));
}

/**
 * For an express lane: whether a cached NXDOMAIN for this plain query may be a walk's first step,
 * which the stage must see (the lane answers the name as cached, never walking). Reads the name
 * only for NXDOMAIN, the one answer a walk changes: a name that exists is answered as it is.
 */
export function firstStepTest(settings: AutopathSettings): (raw: Buffer, reply: Buffer) => boolean {
  return (raw, reply) => {
    if (((reply[3] as number) & RCODE_MASK) !== RCODE.NXDOMAIN) return false;
    try {
      return firstStepOf(toFqdn(readName(raw, 12).name.toLowerCase()), settings.zone) !== undefined;
    } catch {
      return true;
    }
  };
}

/**
 * For an express lane: the cached replies the chain must see first. A TXT (or ANY) question
 * under the client map (`client.dns.<zone>`), which the chain answers only to the forwarder
 * itself and the trusted node caches, however cached its answer (the forwarder's own reads cached
 * it); and, with autopath on, firstStepTest's. Reads the name only for those types and NXDOMAIN.
 */
export function chainFirst(
  clusterZone: Fqdn,
  autopath?: AutopathSettings,
): (raw: Buffer, reply: Buffer, qtype: number) => boolean {
  const firstStep = autopath ? firstStepTest(autopath) : undefined;
  const mapZone = `.${clientMapZone(clusterZone)}`;
  return (raw, reply, qtype) => {
    // Most hits are A or AAAA with data: two comparisons, and the rcode when autopath is on.
    if (qtype !== QTYPE.TXT && qtype !== QTYPE.ANY) return firstStep?.(raw, reply) ?? false;
    if (firstStep?.(raw, reply)) return true;
    try {
      return toFqdn(readName(raw, 12).name.toLowerCase()).endsWith(mapZone);
    } catch {
      return true;
    }
  };
}
