import { Buffer } from 'node:buffer';

// Big-endian reads and writes by index, for the code every query runs through (parse, the
// pipeline's checks, a cache hit's copy). Buffer's own methods (readUInt16BE and the rest) are
// reached through a property load, and a datagram's Buffer, made in C++, misses V8's inline cache
// for it: callgrind counted six generic loads per cache hit in parseQuery alone, each a builtin
// call, and the method itself not inlined. Octets read by index are inlined code.

export function u16(octets: Uint8Array, at: number): number {
  return ((octets[at] as number) << 8) | (octets[at + 1] as number);
}

export function u32(octets: Uint8Array, at: number): number {
  return (
    (((octets[at] as number) << 24) >>> 0) +
    (((octets[at + 1] as number) << 16) | ((octets[at + 2] as number) << 8) | (octets[at + 3] as number))
  );
}

export function putU16(octets: Uint8Array, value: number, at: number): void {
  octets[at] = value >>> 8;
  octets[at + 1] = value;
}

export function putU32(octets: Uint8Array, value: number, at: number): void {
  octets[at] = value >>> 24;
  octets[at + 1] = value >>> 16;
  octets[at + 2] = value >>> 8;
  octets[at + 3] = value;
}

/** Buffer's own latin1Slice, the method `toString('latin1', …)` ends in; typed here, as @types/node does not. */
const latin1Slice = (
  Buffer.prototype as unknown as { latin1Slice(this: Uint8Array, start: number, end: number): string }
).latin1Slice;

/**
 * Octets [start, end) as a latin1 string (one character per octet), as `toString('latin1', start,
 * end)` gives it. Called through a saved reference, not a method of the buffer: a datagram's
 * Buffer misses the inline cache for every method (above), and toString then dispatches on the
 * encoding through two more generic loads. Undici calls Buffer's utf8Slice directly the same way.
 * Any Uint8Array will do, not only a Buffer.
 */
export function latin1Of(octets: Uint8Array, start: number, end: number): string {
  return latin1Slice.call(octets, start, end);
}
