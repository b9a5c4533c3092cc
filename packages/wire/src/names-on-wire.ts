import { Buffer } from 'node:buffer';
import { NameError, QueryFormatError } from './errors.js';

/**
 * The one name codec. A name's text form is RFC 1035 §5.1 presentation: labels joined by dots,
 * a trailing dot, and inside a label `\.` for a dot, `\\` for a backslash and `\DDD` (decimal)
 * for any octet outside 0x21–0x7e. readName and writeName are exact inverses, so a label holding
 * a dot, a space or a NUL reaches an upstream as the same octets it arrived as, and shows safely
 * in logs and metric labels.
 */

const MAX_POINTER_JUMPS = 64;
export const MAX_LABEL_OCTETS = 63;
export const MAX_NAME_OCTETS = 255;

/** 1 for octets that need an escape in a label's text form. */
const NEEDS_ESCAPE = new Uint8Array(256);
for (let c = 0; c < 256; c++) NEEDS_ESCAPE[c] = c < 0x21 || c > 0x7e || c === 0x2e || c === 0x5c ? 1 : 0;

/**
 * Each octet of a label in canonical text form: itself, an ASCII capital lowercased (RFC 4343),
 * or ESCAPED for one that needs an escape (the name then goes through readName). One lookup per
 * octet for the question of every query.
 */
export const CANONICAL_OCTET = Uint16Array.from({ length: 256 }, (_, c) =>
  NEEDS_ESCAPE[c] ? 0x100 : c >= 0x41 && c <= 0x5a ? c + 0x20 : c,
);
export const ESCAPED = 0x100;

function escapeLabel(msg: Uint8Array, start: number, end: number): string {
  let out = '';
  for (let i = start; i < end; i++) {
    const c = msg[i] as number;
    if (!NEEDS_ESCAPE[c]) out += String.fromCharCode(c);
    else if (c === 0x2e || c === 0x5c) out += `\\${String.fromCharCode(c)}`;
    else out += `\\${String(c).padStart(3, '0')}`;
  }
  return out;
}

/**
 * Reads a possibly compressed name at `offset`; returns its text form (case kept, trailing dot)
 * and the offset just past it where it started. Pointers must point backwards, at most 64 hops.
 */
export function readName(msg: Buffer, offset: number): { name: string; end: number } {
  let name = '';
  let pos = offset;
  let end = -1;
  let jumps = 0;
  let length = 1;
  for (;;) {
    if (pos >= msg.length) throw new QueryFormatError('name runs past the end of the message', true);
    const len = msg[pos] as number;
    if (len === 0) {
      if (end === -1) end = pos + 1;
      break;
    }
    const kind = len & 0xc0;
    if (kind === 0xc0) {
      if (pos + 1 >= msg.length) throw new QueryFormatError('truncated compression pointer', true);
      if (++jumps > MAX_POINTER_JUMPS) throw new QueryFormatError('compression pointer loop', true);
      if (end === -1) end = pos + 2;
      const target = ((len & 0x3f) << 8) | (msg[pos + 1] as number);
      if (target >= pos) throw new QueryFormatError('compression pointer does not point backwards', true);
      pos = target;
      continue;
    }
    if (kind !== 0) throw new QueryFormatError('reserved label type', true);
    if (pos + 1 + len > msg.length) throw new QueryFormatError('label runs past the end of the message', true);
    length += len + 1;
    if (length > MAX_NAME_OCTETS) throw new QueryFormatError('name longer than 255 octets', true);
    name += `${escapeLabel(msg, pos + 1, pos + 1 + len)}.`;
    pos += 1 + len;
  }
  return { name: name === '' ? '.' : name, end };
}

/** Offset just past the name at `offset`, checking its shape but not following pointers. */
export function skipName(msg: Buffer, offset: number): number {
  let pos = offset;
  for (;;) {
    if (pos >= msg.length) throw new QueryFormatError('name runs past the end of the message', true);
    const len = msg[pos] as number;
    if (len === 0) return pos + 1;
    const kind = len & 0xc0;
    if (kind === 0xc0) {
      if (pos + 1 >= msg.length) throw new QueryFormatError('truncated compression pointer', true);
      return pos + 2;
    }
    if (kind !== 0) throw new QueryFormatError('reserved label type', true);
    pos += 1 + len;
  }
}

/** The octets of each label of a name's text form, leaf first. Throws NameError. */
export function labelOctets(text: string): number[][] {
  const bare = text === '.' ? '' : text.endsWith('.') && !isEscapedAt(text, text.length - 1) ? text.slice(0, -1) : text;
  if (bare === '') return [];
  const labels: number[][] = [];
  let label: number[] = [];
  for (let i = 0; i < bare.length; i++) {
    const c = bare.charCodeAt(i);
    if (c === 0x2e) {
      if (label.length === 0) throw new NameError(text, 'an empty label');
      labels.push(label);
      label = [];
    } else if (c === 0x5c) {
      const digits = /^\d{3}/.exec(bare.slice(i + 1, i + 4));
      if (digits) {
        const value = Number(digits[0]);
        if (value > 255) throw new NameError(text, `\\${digits[0]} is not an octet`);
        label.push(value);
        i += 3;
      } else {
        if (i + 1 >= bare.length) throw new NameError(text, 'a trailing backslash');
        label.push(bare.charCodeAt(++i) & 0xff);
      }
    } else {
      if (c > 0xff) throw new NameError(text, 'a character outside Latin-1; write it as \\DDD octets');
      label.push(c);
    }
  }
  if (label.length === 0) throw new NameError(text, 'an empty label');
  labels.push(label);
  let total = 1;
  for (const l of labels) {
    if (l.length > MAX_LABEL_OCTETS) throw new NameError(text, 'a label longer than 63 octets');
    total += l.length + 1;
  }
  if (total > MAX_NAME_OCTETS) throw new NameError(text, 'longer than 255 octets');
  return labels;
}

/** Encodes a name's text form without compression: the inverse of readName. Throws NameError. */
export function writeName(text: string): Buffer {
  const labels = labelOctets(text);
  const out = Buffer.alloc(labels.reduce((n, l) => n + l.length + 1, 1));
  let pos = 0;
  for (const l of labels) {
    out[pos++] = l.length;
    for (const c of l) out[pos++] = c;
  }
  return out;
}

/** True when the character at `index` is escaped by an odd run of backslashes before it. */
export function isEscapedAt(text: string, index: number): boolean {
  let slashes = 0;
  for (let i = index - 1; i >= 0 && text.charCodeAt(i) === 0x5c; i--) slashes++;
  return slashes % 2 === 1;
}
