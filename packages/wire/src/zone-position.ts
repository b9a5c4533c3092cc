import { Buffer } from 'node:buffer';

/**
 * Where a copy of our zones stands on the cluster's own clock, so that any record-builder replica
 * can answer an IXFR from it, not only the one that made it. Each replica counts the same API
 * events, but its SOA serial alone cannot say which of them a copy holds: watches of different
 * resources deliver apart, so two replicas pass through different mixes on the way. The position
 * says it per watched resource: the resourceVersion up to which every event of that resource is
 * in the copy (KEP-5504: resourceVersions are integers clients may compare), and, when the copy
 * was made at a quiet moment, a fingerprint of the resource's objects (how many, and a sum of a
 * hash of each name and resourceVersion), by which a replica that started later recognises a copy
 * of the state it started from.
 *
 * The record-builder sends it with every IXFR reply; a forwarder keeps it as it came and sends it
 * back with its next IXFR query. It is an EDNS option of our own, from the range kept for local
 * and experimental use (RFC 6891 §9), so a secondary that does not send one is answered by serial.
 */
export const ZONE_POSITION_OPTION = 65054;

const VERSION = 1;
const ORIGIN_BYTES = 8;
const ENTRY_BYTES = 26;
/** The largest resourceVersion we carry exactly: JavaScript numbers are exact to 2^53. */
const MAX_VERSION = Number.MAX_SAFE_INTEGER;

/** A resource's objects as a multiset of (name, resourceVersion): equal states, equal fingerprints. */
export interface StateFingerprint {
  readonly count: number;
  /** The sum of each object's 32-bit hash, modulo 2^32. */
  readonly sum: number;
}

export interface ResourcePosition {
  /** Every event of the resource up to this resourceVersion is in the copy. */
  readonly version: number;
  /**
   * No event after this one is: the copy's answers were asked while events between the two were
   * arriving, so it may hold any state between them.
   */
  readonly upto: number;
  /** The resource's objects at exactly `version`, when nothing after it was in the copy. */
  readonly fingerprint?: StateFingerprint;
}

export interface ZonePosition {
  /** The replica process that made the copy: its own serials it can trust as they are. */
  readonly origin: Buffer;
  /** By resource, in the record-builder's numbering. */
  readonly resources: ReadonlyMap<number, ResourcePosition>;
}

export function encodeZonePosition(position: ZonePosition): Buffer {
  const out = Buffer.alloc(2 + ORIGIN_BYTES + position.resources.size * ENTRY_BYTES);
  out[0] = VERSION;
  position.origin.copy(out, 1, 0, ORIGIN_BYTES);
  out[1 + ORIGIN_BYTES] = position.resources.size;
  let at = 2 + ORIGIN_BYTES;
  for (const [id, p] of position.resources) {
    out[at] = id;
    writeVersion(out, p.version, at + 1);
    writeVersion(out, p.upto, at + 9);
    out[at + 17] = p.fingerprint ? 1 : 0;
    out.writeUInt32BE(p.fingerprint?.count ?? 0, at + 18);
    out.writeUInt32BE(p.fingerprint?.sum ?? 0, at + 22);
    at += ENTRY_BYTES;
  }
  return out;
}

/** The position in an option's data; undefined when it is not one we can read (then: by serial). */
export function decodeZonePosition(data: Buffer): ZonePosition | undefined {
  if (data.length < 2 + ORIGIN_BYTES || data[0] !== VERSION) return undefined;
  const n = data[1 + ORIGIN_BYTES] as number;
  if (data.length !== 2 + ORIGIN_BYTES + n * ENTRY_BYTES) return undefined;
  const resources = new Map<number, ResourcePosition>();
  for (let at = 2 + ORIGIN_BYTES; at < data.length; at += ENTRY_BYTES) {
    const version = readVersion(data, at + 1);
    const upto = readVersion(data, at + 9);
    if (version > MAX_VERSION || upto > MAX_VERSION || upto < version || resources.has(data[at] as number))
      return undefined;
    const fingerprint =
      data[at + 17] === 1 ? { count: data.readUInt32BE(at + 18), sum: data.readUInt32BE(at + 22) } : undefined;
    resources.set(data[at] as number, fingerprint ? { version, upto, fingerprint } : { version, upto });
  }
  return { origin: Buffer.from(data.subarray(1, 1 + ORIGIN_BYTES)), resources };
}

function writeVersion(out: Buffer, version: number, at: number): void {
  out.writeUInt32BE(Math.floor(version / 0x1_0000_0000), at);
  out.writeUInt32BE(version % 0x1_0000_0000, at + 4);
}

const readVersion = (data: Buffer, at: number) => data.readUInt32BE(at) * 0x1_0000_0000 + data.readUInt32BE(at + 4);

/**
 * A resourceVersion as a number, or undefined when it is not a decimal integer we can hold
 * exactly (an API server before KEP-5504 may hand out opaque ones: then there is no position).
 */
export function resourceVersionNumber(text: string | undefined): number | undefined {
  if (!text || !/^[0-9]{1,16}$/.test(text)) return undefined;
  const n = Number(text);
  return n <= MAX_VERSION ? n : undefined;
}

/** FNV-1a, 32 bits: one object's share of its resource's fingerprint. */
export function objectHash(key: string, resourceVersion: string): number {
  let h = 0x811c9dc5;
  const text = `${key}@${resourceVersion}`;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}
