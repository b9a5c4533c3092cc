import { isEscapedAt, labelOctets, readName, writeName } from './names-on-wire.js';

/**
 * A DNS name in canonical form: presentation text (see names-on-wire.ts), ASCII letters
 * lowercased, with its trailing dot. Made only by toFqdn.
 */
export type Fqdn = string & { readonly __brand: 'Fqdn' };

export const ROOT = '.' as Fqdn;

/**
 * The one place a name becomes canonical: lowercase and ending in a dot. Names with escapes go
 * through the codec once, so `\065` and `a` are the same name (RFC 4343: only ASCII letters fold).
 */
export function toFqdn(name: string): Fqdn {
  if (name === '' || name === '.') return ROOT;
  if (name.includes('\\')) return readName(writeName(name), 0).name.toLowerCase() as Fqdn;
  const lower = name.toLowerCase();
  return (lower.endsWith('.') ? lower : `${lower}.`) as Fqdn;
}

/** Index of the first dot that ends a label (not an escaped one), or -1. */
function firstBoundary(name: string, from = 0): number {
  for (let i = name.indexOf('.', from); i !== -1; i = name.indexOf('.', i + 1)) {
    if (!isEscapedAt(name, i)) return i;
  }
  return -1;
}

/** Labels of a name in text form, leaf first, without the root: "a.b." → ["a", "b"]. */
export function labelsOf(name: Fqdn): string[] {
  if (name === ROOT) return [];
  if (!name.includes('\\')) return name.slice(0, -1).split('.');
  const out: string[] = [];
  let start = 0;
  for (let dot = firstBoundary(name); dot !== -1; dot = firstBoundary(name, dot + 1)) {
    out.push(name.slice(start, dot));
    start = dot + 1;
  }
  return out;
}

/** True when `name` equals `zone` or lies below it. */
export function isInZone(name: Fqdn, zone: Fqdn): boolean {
  if (zone === ROOT || name === zone) return true;
  const dot = name.length - zone.length - 1;
  return dot >= 0 && name.endsWith(zone) && name.charCodeAt(dot) === 0x2e && !isEscapedAt(name, dot);
}

/** What `zones` holds for the closest zone enclosing `name` (the longest that holds it), if any. */
export function closestZone<T>(zones: ReadonlyMap<Fqdn, T>, name: Fqdn): T | undefined {
  let best: Fqdn | undefined;
  for (const zone of zones.keys())
    if (isInZone(name, zone) && (best === undefined || zone.length > best.length)) best = zone;
  return best === undefined ? undefined : zones.get(best);
}

/**
 * The block (of several, each over some zones) that serves a name: the one with its longest zone,
 * the first on a tie, as CoreDNS picks a server block. Undefined when no zone holds the name.
 */
export function closestBlock<T extends { readonly zones: readonly Fqdn[] }>(
  blocks: Iterable<T>,
  name: Fqdn,
): T | undefined {
  let best: T | undefined;
  let length = -1;
  for (const block of blocks)
    for (const zone of block.zones)
      if (zone.length > length && isInZone(name, zone)) {
        best = block;
        length = zone.length;
      }
  return best;
}

/** The name one label up: "a.b." → "b.", "b." → ".". */
export function parentOf(name: Fqdn): Fqdn {
  if (name === ROOT) return ROOT;
  const dot = firstBoundary(name);
  return (dot === name.length - 1 ? ROOT : name.slice(dot + 1)) as Fqdn;
}

/** A name of up to 255 octets whose labels are 1–63 octets (RFC 1035 §2.3.4), escapes allowed. */
export function isValidName(name: string): boolean {
  try {
    labelOctets(name);
    return true;
  } catch {
    // labelOctets explains why in its NameError; here only the verdict is wanted.
    return false;
  }
}

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** A DNS-1123 label: what Kubernetes allows for namespaces and Service names (≤ 63, lowercase). */
export function isDns1123Label(text: string): boolean {
  return text.length <= 63 && DNS1123_LABEL.test(text);
}

/**
 * A DNS-1123 subdomain, the rule for kube-dns ConfigMap stubDomains keys and --domain: labels as
 * above, ≤ 253 characters, an optional trailing dot. Kubernetes' own check does not bound each
 * label, but a label over 63 octets cannot be a DNS name, so it is refused here.
 */
export function isDns1123Subdomain(text: string): boolean {
  const bare = text.endsWith('.') ? text.slice(0, -1) : text;
  return bare.length > 0 && bare.length <= 253 && bare.split('.').every(isDns1123Label);
}
