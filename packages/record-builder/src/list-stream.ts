import { latin1Of } from '@cluster-dns/wire';

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const COMMA = 0x2c;

/** Where the bytes being read belong. */
const Part = {
  /** The list object around the items (kind, metadata): kept, parsed at the end. */
  Outside: 0,
  /** Inside the items array, between two items. */
  Between: 1,
  /** Inside one item. */
  Item: 2,
} as const;

/** The list's own fields, known once its last byte is read. */
export interface ListEnd {
  readonly resourceVersion: string;
  readonly continueToken: string | undefined;
  readonly items: number;
}

/** A list body that is not JSON of a list object. */
export class MalformedListError extends Error {
  override readonly name = 'MalformedListError';
}

const isSpace = (c: number) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;

/**
 * A Kubernetes list body (`{"metadata":{…},"items":[{…},{…},…]}`) cut into its items while it
 * arrives, each item handed on as its own JSON text.
 *
 * Why: parsed whole, a page of 500 controller-shaped EndpointSlices is 15 MB of JSON and a graph of
 * about a million objects, all alive until the last one is read. With the API worker's young
 * generation far smaller than that, the scavenger copied the graph and promoted it, and the old
 * generation then marked it: the worker's start spent ~800 ms in GC (CPU profile, case-5 cluster).
 * One item at a time, each graph dies young and a scavenge finds almost nothing to keep, and the
 * store is fed as the bytes arrive instead of after the page.
 *
 * The text is latin1, one character per octet, not UTF-8 decoded: JSON's structure is ASCII, and
 * every field DNS reads is ASCII by the API's validation (DNS-1123 names, IPs, port names,
 * hostnames), so a non-ASCII octet (in an annotation, say) becomes a wrong character in a field
 * nobody reads, never broken JSON. Decoding the case-5 cluster's 35 MB as UTF-8 cost the worker
 * 180 ms.
 *
 * It finds the items by bracket depth, skipping strings (and the escapes in them); it does not
 * check the JSON itself: each item goes through JSON.parse, and the list's own fields through
 * JSON.parse at the end. No chunk boundary matters: the state carries over.
 */
export class ListStream {
  private part: number = Part.Outside;
  private depth = 0;
  private inString = false;
  private escaped = false;
  /** The list object without its items (`"items":[]`), as read so far. */
  private outside = '';
  /** The start of the item being read, from an earlier chunk. */
  private itemHead = '';
  private items = 0;

  constructor(private readonly onItem: (json: string) => void) {}

  push(chunk: Uint8Array): void {
    const n = chunk.length;
    // Where this chunk's run of the current part began (its bytes are copied out at a switch).
    let from = 0;
    let { part, depth, inString, escaped } = this;
    for (let i = 0; i < n; i++) {
      let c = chunk[i] as number;
      if (inString) {
        if (escaped) {
          escaped = false;
          continue;
        }
        // Most of a list's octets are in strings: run through them in a loop of their own.
        while (c !== QUOTE && c !== BACKSLASH && ++i < n) c = chunk[i] as number;
        if (c === BACKSLASH) escaped = true;
        else if (c === QUOTE) inString = false;
        continue;
      }
      if (part === Part.Between) {
        if (c === OPEN_BRACE) {
          part = Part.Item;
          depth = 3;
          from = i;
        } else if (c === CLOSE_BRACKET) {
          part = Part.Outside;
          depth = 1;
          from = i;
        } else if (c !== COMMA && !isSpace(c))
          throw new MalformedListError(`an item of the list is not an object (${String.fromCharCode(c)})`);
        continue;
      }
      if (c === QUOTE) inString = true;
      else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
        if (c === OPEN_BRACKET && part === Part.Outside && depth === 1 && this.itemsKeyEnds(chunk, from, i)) {
          this.outside += latin1Of(chunk, from, i + 1);
          part = Part.Between;
          depth = 2;
          continue;
        }
        depth++;
      } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
        depth--;
        if (part === Part.Item && depth === 2) {
          const json =
            this.itemHead === '' ? latin1Of(chunk, from, i + 1) : this.itemHead + latin1Of(chunk, from, i + 1);
          this.itemHead = '';
          part = Part.Between;
          this.items++;
          this.onItem(json);
        } else if (depth < 0) throw new MalformedListError('the list body closes more brackets than it opens');
      }
    }
    if (part === Part.Outside) this.outside += latin1Of(chunk, from, n);
    else if (part === Part.Item) this.itemHead += latin1Of(chunk, from, n);
    this.part = part;
    this.depth = depth;
    this.inString = inString;
    this.escaped = escaped;
  }

  /** The list's resourceVersion and continue token, once the body is all read. */
  end(): ListEnd {
    if (this.part !== Part.Outside || this.depth !== 0 || this.inString)
      throw new MalformedListError('the list body ended before the list did');
    if (this.outside.trim() === '') throw new MalformedListError('the list body is empty');
    let list: { metadata?: { resourceVersion?: string; continue?: string } } | null;
    try {
      list = JSON.parse(this.outside);
    } catch (error) {
      throw new MalformedListError(`the list's own fields are not JSON: ${(error as Error).message}`);
    }
    if (typeof list !== 'object' || list === null || Array.isArray(list))
      throw new MalformedListError('the list body is not a JSON object');
    return {
      resourceVersion: list.metadata?.resourceVersion ?? '',
      continueToken: list.metadata?.continue || undefined,
      items: this.items,
    };
  }

  /** Whether the list object's text before `at` ends with the key `"items":`. */
  private itemsKeyEnds(chunk: Uint8Array, from: number, at: number): boolean {
    const before = this.outside.slice(-32) + latin1Of(chunk, Math.max(from, at - 32), at);
    return /"items"\s*:\s*$/.test(before);
  }
}
