import { Buffer } from 'node:buffer';
import type { Fqdn } from './fqdn.js';
import { labelOctets, readName } from './names-on-wire.js';

/**
 * The names a NOTIFY's change made stale, carried in the NOTIFY itself, so a node cache drops them
 * at once and answers, with no transfer: the record-builder's cost per change is then one
 * encoding for every cache at the same serial and a datagram to each, not a transfer per cache.
 * An EDNS option of our own (RFC 6891 §9's local range), beside the zone position's (65054).
 *
 * It says: between the sender's serials `from` and `to`, these names changed (`complete`), or
 * more changed than fit (not complete: the receiver fetches the changes by IXFR as for a plain
 * NOTIFY). `origin` is the sender process (zone-position.ts's): a serial chains only onto the
 * same sender's. The receiver trusts none of it beyond dropping names and deciding whether to
 * fetch: a forged one costs evictions or a fetch, never a stale answer (zone-sync.ts).
 *
 * Data: version (1), origin (8), from (4), to (4), flags (1, bit 0 complete), then each name
 * relative to the zone as labels ending in a zero octet (the apex: a zero alone) or in a pointer
 * to a tail written before it.
 */
export const NOTIFY_CHANGES_OPTION = 65055;

const VERSION = 1;
const ORIGIN_BYTES = 8;
const HEADER_BYTES = 1 + ORIGIN_BYTES + 4 + 4 + 1;
const COMPLETE = 1;

export interface NotifyChanges {
  readonly origin: Buffer;
  readonly from: number;
  readonly to: number;
  /** False: more changed than the NOTIFY carries; fetch them. */
  readonly complete: boolean;
  readonly names: readonly Fqdn[];
}

/** The name relative to the zone in text form ('.' for the apex). */
function relative(name: Fqdn, zone: Fqdn): string {
  if (name === zone) return '.';
  return zone === '.' ? name : name.slice(0, name.length - zone.length);
}

/**
 * Encodes the changes, the names as many as fit in `maxBytes` of data: when they do not all fit,
 * none are sent and the option says so (a receiver fetches them: half a list would be worse than
 * none, as it could not tell which half it has). A name's tail already written is a pointer to it
 * (RFC 1035 §4.1.4, offsets from the data's start): most names share their namespace's.
 */
export function encodeNotifyChanges(changes: NotifyChanges, zone: Fqdn, maxBytes = 1100): Buffer {
  const out = Buffer.alloc(maxBytes);
  out[0] = VERSION;
  changes.origin.copy(out, 1, 0, ORIGIN_BYTES);
  out.writeUInt32BE(changes.from >>> 0, 1 + ORIGIN_BYTES);
  out.writeUInt32BE(changes.to >>> 0, 5 + ORIGIN_BYTES);
  let at = HEADER_BYTES;
  let complete = changes.complete;
  if (complete) {
    const tails = new Map<string, number>();
    names: for (const name of changes.names) {
      const labels = labelOctets(relative(name, zone));
      for (let i = 0; i <= labels.length; i++) {
        const tail = i === labels.length ? '' : tailKey(labels, i);
        const pointer = tail === '' ? undefined : tails.get(tail);
        if (pointer !== undefined || i === labels.length) {
          const need = pointer !== undefined ? 2 : 1;
          if (at + need > maxBytes) {
            complete = false;
            break names;
          }
          if (pointer !== undefined) at = out.writeUInt16BE(0xc000 | pointer, at);
          else out[at++] = 0;
          continue names;
        }
        const label = labels[i] as number[];
        if (at + 1 + label.length > maxBytes) {
          complete = false;
          break names;
        }
        if (at < 0x4000) tails.set(tail, at);
        out[at++] = label.length;
        for (const c of label) out[at++] = c;
      }
    }
  }
  if (!complete) at = HEADER_BYTES;
  out[9 + ORIGIN_BYTES] = complete ? COMPLETE : 0;
  return Buffer.from(out.subarray(0, at));
}

/** The labels from `i` on, as a key (lowercase: names are compared without case). */
function tailKey(labels: readonly number[][], i: number): string {
  let key = '';
  for (let j = i; j < labels.length; j++) key += `${String.fromCharCode(...(labels[j] as number[])).toLowerCase()}.`;
  return key;
}

/** Whether option data we encoded carries every name (its flags octet). */
export function carriesEveryName(data: Buffer): boolean {
  return data.length >= HEADER_BYTES && ((data[HEADER_BYTES - 1] as number) & COMPLETE) !== 0;
}

/** The changes in an option's data, or undefined when it is not one we can read (a plain NOTIFY). */
export function decodeNotifyChanges(data: Buffer, zone: Fqdn): NotifyChanges | undefined {
  if (data.length < HEADER_BYTES || data[0] !== VERSION) return undefined;
  const names: Fqdn[] = [];
  try {
    for (let at = HEADER_BYTES; at < data.length; ) {
      const { name, end } = readName(data, at);
      const full = name === '.' ? zone : ((zone === '.' ? name : name + zone) as Fqdn);
      if (full.length > 254) return undefined;
      names.push(full.toLowerCase() as Fqdn);
      at = end;
    }
  } catch {
    return undefined;
  }
  return {
    origin: Buffer.from(data.subarray(1, 1 + ORIGIN_BYTES)),
    from: data.readUInt32BE(1 + ORIGIN_BYTES),
    to: data.readUInt32BE(5 + ORIGIN_BYTES),
    complete: ((data[9 + ORIGIN_BYTES] as number) & COMPLETE) !== 0,
    names,
  };
}
