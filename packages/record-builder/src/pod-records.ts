import { isIP } from 'node:net';
import { type Fqdn, labelsOf } from '@cluster-dns/wire';
import { normalizeIp } from './kube-objects.js';

export type PodsMode = 'insecure' | 'verified' | 'disabled';

/** What a name under `pod.<zone>` stands for. */
export type PodName =
  | { kind: 'apex' }
  | { kind: 'namespace'; namespace: string }
  | { kind: 'address'; namespace: string; ip: string }
  | { kind: 'invalid' };

/**
 * Reads `<a-b-c-d>.<ns>.pod.<zone>` (and the IPv6 dashed form, `fd00--1`), given the labels
 * below `pod.<zone>`. The address must be well-formed; kube-dns's [QUIRK] of answering NODATA for
 * a bad one is not copied: it is NXDOMAIN.
 */
export function parsePodName(name: Fqdn, podZone: Fqdn): PodName {
  const below = labelsOf(name).slice(0, labelsOf(name).length - labelsOf(podZone).length);
  if (below.length === 0) return { kind: 'apex' };
  if (below.length === 1) return { kind: 'namespace', namespace: below[0] as string };
  if (below.length !== 2) return { kind: 'invalid' };
  const [label, namespace] = below as [string, string];
  const ip = addressOfDashed(label);
  return ip ? { kind: 'address', namespace, ip } : { kind: 'invalid' };
}

/** The address a pod-style label spells (`10-244-1-7`, `fd00--1`), or undefined. */
export function addressOfDashed(label: string): string | undefined {
  const dotted = label.replace(/-/g, '.');
  if (isIP(dotted) === 4) return dotted;
  const colons = label.replace(/-/g, ':');
  return isIP(colons) === 6 ? normalizeIp(colons) : undefined;
}
