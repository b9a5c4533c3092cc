/**
 * Which parts of a JSON value to keep: `true` keeps the value whole; an object keeps those keys of
 * an object value, each by its own spec, and drops the rest; `[spec]` keeps every element of an
 * array value by `spec`. A value of another shape than its spec (null, say) is kept whole.
 */
export type PickSpec = true | { readonly [key: string]: PickSpec } | readonly [PickSpec];

/** JSON that is not well formed where pickJson reads it. */
export class PickError extends Error {
  override readonly name = 'PickError';
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const COMMA = 0x2c;
const COLON = 0x3a;

/**
 * The parts of the JSON `text` that `spec` names, as JSON.parse would give them, without building
 * the rest. An EndpointSlice as the controller writes it is ~30 KB, most of it per-endpoint
 * targetRef, nodeName and zone and the object's managedFields: JSON.parse made every one of those
 * objects and strings, for each watch event, only for the API worker to read a few fields and drop
 * the rest. Here the dropped parts are only scanned past (their strings and brackets, not checked
 * as JSON); what is kept goes through JSON.parse piece by piece.
 */
export function pickJson(text: string, spec: PickSpec): unknown {
  const reader = new Reader(text);
  const value = reader.value(reader.space(0), spec);
  if (reader.space(reader.at) !== text.length) throw new PickError(`unexpected text after the value at ${reader.at}`);
  return value;
}

class Reader {
  /** Where the last value read ended. */
  at = 0;

  constructor(private readonly text: string) {}

  space(i: number): number {
    const { text } = this;
    for (;;) {
      const c = text.charCodeAt(i);
      if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) return i;
      i++;
    }
  }

  value(i: number, spec: PickSpec): unknown {
    const c = this.text.charCodeAt(i);
    if (spec !== true && c === OPEN_BRACE && !Array.isArray(spec))
      return this.object(i, spec as Record<string, PickSpec>);
    if (spec !== true && c === OPEN_BRACKET && Array.isArray(spec)) return this.array(i, spec[0] as PickSpec);
    const end = this.skip(i);
    this.at = end;
    try {
      return JSON.parse(this.text.slice(i, end));
    } catch (error) {
      throw new PickError(`${(error as Error).message} (in the value at ${i})`);
    }
  }

  private object(i: number, spec: Record<string, PickSpec>): Record<string, unknown> {
    const { text } = this;
    const out: Record<string, unknown> = {};
    i = this.space(i + 1);
    if (text.charCodeAt(i) === CLOSE_BRACE) {
      this.at = i + 1;
      return out;
    }
    for (;;) {
      if (text.charCodeAt(i) !== QUOTE) throw new PickError(`expected a key at ${i}`);
      const keyEnd = this.skipString(i);
      const raw = text.slice(i + 1, keyEnd - 1);
      const key = raw.includes('\\') ? (JSON.parse(text.slice(i, keyEnd)) as string) : raw;
      i = this.space(keyEnd);
      if (text.charCodeAt(i) !== COLON) throw new PickError(`expected ':' at ${i}`);
      i = this.space(i + 1);
      const wanted = Object.hasOwn(spec, key) ? spec[key] : undefined;
      if (wanted === undefined) i = this.skip(i);
      else {
        out[key] = this.value(i, wanted);
        i = this.at;
      }
      i = this.space(i);
      const c = text.charCodeAt(i);
      if (c === CLOSE_BRACE) {
        this.at = i + 1;
        return out;
      }
      if (c !== COMMA) throw new PickError(`expected ',' or '}' at ${i}`);
      i = this.space(i + 1);
    }
  }

  private array(i: number, spec: PickSpec): unknown[] {
    const { text } = this;
    const out: unknown[] = [];
    i = this.space(i + 1);
    if (text.charCodeAt(i) === CLOSE_BRACKET) {
      this.at = i + 1;
      return out;
    }
    for (;;) {
      out.push(this.value(i, spec));
      i = this.space(this.at);
      const c = text.charCodeAt(i);
      if (c === CLOSE_BRACKET) {
        this.at = i + 1;
        return out;
      }
      if (c !== COMMA) throw new PickError(`expected ',' or ']' at ${i}`);
      i = this.space(i + 1);
    }
  }

  /** The end of the string starting at i (after its closing quote). */
  private skipString(i: number): number {
    const { text } = this;
    const n = text.length;
    for (i++; i < n; i++) {
      const c = text.charCodeAt(i);
      if (c === QUOTE) return i + 1;
      if (c === BACKSLASH) i++;
    }
    throw new PickError('a string is not closed');
  }

  /** The end of the value starting at i: a string, a nested object or array, or a literal. */
  private skip(i: number): number {
    const { text } = this;
    const n = text.length;
    const first = text.charCodeAt(i);
    if (first === QUOTE) return this.skipString(i);
    if (first !== OPEN_BRACE && first !== OPEN_BRACKET) {
      // A number, true, false or null: up to the next delimiter.
      let j = i;
      for (; j < n; j++) {
        const c = text.charCodeAt(j);
        if (
          c === COMMA ||
          c === CLOSE_BRACE ||
          c === CLOSE_BRACKET ||
          c === 0x20 ||
          c === 0x0a ||
          c === 0x0d ||
          c === 0x09
        )
          break;
      }
      if (j === i) throw new PickError(`expected a value at ${i}`);
      return j;
    }
    let depth = 0;
    for (; i < n; i++) {
      const c = text.charCodeAt(i);
      if (c === QUOTE) i = this.skipString(i) - 1;
      else if (c === OPEN_BRACE || c === OPEN_BRACKET) depth++;
      else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
        if (--depth === 0) return i + 1;
      }
    }
    throw new PickError('an object or array is not closed');
  }
}
