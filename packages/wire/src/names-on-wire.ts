import { QueryFormatError } from './errors.js';

const MAX_POINTER_JUMPS = 64;

/**
 * Reads a possibly compressed name at `offset`; returns it dotted with a trailing dot, as written
 * (case kept), and the offset just past it in the original position.
 */
export function readName(msg: Buffer, offset: number): { name: string; end: number } {
  let name = '';
  let pos = offset;
  let end = -1;
  let jumps = 0;
  let length = 0;
  for (;;) {
    if (pos >= msg.length) throw new QueryFormatError('name runs past the end of the message', true);
    const len = msg[pos] as number;
    if (len === 0) {
      if (end === -1) end = pos + 1;
      break;
    }
    if ((len & 0xc0) === 0xc0) {
      if (pos + 1 >= msg.length) throw new QueryFormatError('truncated compression pointer', true);
      if (++jumps > MAX_POINTER_JUMPS) throw new QueryFormatError('compression pointer loop', true);
      if (end === -1) end = pos + 2;
      const target = ((len & 0x3f) << 8) | (msg[pos + 1] as number);
      if (target >= pos) throw new QueryFormatError('compression pointer points forward', true);
      pos = target;
      continue;
    }
    if (len > 63) throw new QueryFormatError('label longer than 63 octets', true);
    if (pos + 1 + len > msg.length) throw new QueryFormatError('label runs past the end of the message', true);
    length += len + 1;
    if (length > 255) throw new QueryFormatError('name longer than 255 octets', true);
    name += `${msg.toString('latin1', pos + 1, pos + 1 + len).replace(/[.\\]/g, (c) => `\\${c}`)}.`;
    pos += 1 + len;
  }
  return { name: name === '' ? '.' : name, end };
}

/** Offset just past the name at `offset`, without decoding it. */
export function skipName(msg: Buffer, offset: number): number {
  let pos = offset;
  for (;;) {
    if (pos >= msg.length) throw new QueryFormatError('name runs past the end of the message', true);
    const len = msg[pos] as number;
    if (len === 0) return pos + 1;
    if ((len & 0xc0) === 0xc0) return pos + 2;
    if (len > 63) throw new QueryFormatError('bad label length', true);
    pos += 1 + len;
  }
}

/** Encodes a dotted name without compression. Used for questions built by our clients. */
export function writeName(name: string): Buffer {
  const bare = name.endsWith('.') ? name.slice(0, -1) : name;
  if (bare === '') return Buffer.from([0]);
  const parts = bare.split('.').map((l) => Buffer.from(l, 'latin1'));
  const out = Buffer.alloc(parts.reduce((n, p) => n + p.length + 1, 1));
  let pos = 0;
  for (const p of parts) {
    out[pos++] = p.length;
    p.copy(out, pos);
    pos += p.length;
  }
  return out;
}
