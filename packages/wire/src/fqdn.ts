/** A DNS name in canonical form: lowercase, absolute, with its trailing dot. Made only by toFqdn. */
export type Fqdn = string & { readonly __brand: 'Fqdn' };

export const ROOT = '.' as Fqdn;

/** The one place a name becomes canonical: lowercase and ending in a dot. */
export function toFqdn(name: string): Fqdn {
  if (name === '' || name === '.') return ROOT;
  const lower = name.toLowerCase();
  return (lower.endsWith('.') ? lower : `${lower}.`) as Fqdn;
}

/** Labels of a name, leaf first, without the root: "a.b." → ["a", "b"]. */
export function labelsOf(name: Fqdn): string[] {
  return name === ROOT ? [] : name.slice(0, -1).split('.');
}

/** True when `name` equals `zone` or lies below it. */
export function isInZone(name: Fqdn, zone: Fqdn): boolean {
  if (zone === ROOT) return true;
  return name === zone || (name.endsWith(zone) && name[name.length - zone.length - 1] === '.');
}

/** The name one label up: "a.b." → "b.", "b." → ".". */
export function parentOf(name: Fqdn): Fqdn {
  if (name === ROOT) return ROOT;
  const dot = name.indexOf('.');
  return (dot === name.length - 1 ? ROOT : name.slice(dot + 1)) as Fqdn;
}

/** A name of up to 255 octets whose labels are 1–63 octets (RFC 1035 §2.3.4). */
export function isValidName(name: string): boolean {
  const fqdn = toFqdn(name);
  if (fqdn === ROOT) return true;
  if (fqdn.length > 254) return false;
  return labelsOf(fqdn).every((l) => l.length > 0 && l.length <= 63);
}

/** A DNS-1123 label: what Kubernetes allows for namespaces and Service names. */
export function isDns1123Label(text: string): boolean {
  return text.length <= 63 && /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(text);
}

/** A DNS-1123 subdomain: dot-separated DNS-1123 labels, up to 253 characters. */
export function isDns1123Subdomain(text: string): boolean {
  const bare = text.endsWith('.') ? text.slice(0, -1) : text;
  return bare.length > 0 && bare.length <= 253 && bare.split('.').every(isDns1123Label);
}
