import {
  absoluteName,
  classFromText,
  isDnssecType,
  RecordTextError,
  recordOfWords,
  recordWords,
  ttlFromText,
  typeFromText,
} from './record-text.js';
import type { DecodedRr } from './records.js';

export interface ZoneFileOptions {
  /** The zone's name: the first $ORIGIN, and what `@` means until one is given. */
  origin: string;
  /** Reads a `$INCLUDE`d file (relative to the zone file's folder, the caller's business). */
  include?: (path: string) => string;
  /** Told of each DNSSEC record skipped, by line. */
  onSkipped?: (line: number) => void;
}

/** Where a zone file's text went wrong: the line, and what. */
function fail(line: number, error: unknown): never {
  const message = error instanceof Error ? error.message : String(error);
  throw new RecordTextError(`line ${line}: ${message}`);
}

/** The type of an entry's record: after the owner (unless blank) and up to a TTL and a class. */
function typeOfEntry(words: readonly string[], blank: boolean): number | undefined {
  let i = blank ? 0 : 1;
  for (let k = 0; k < 2; k++) {
    const w = words[i];
    if (
      w !== undefined &&
      (ttlFromText(w) !== undefined || (classFromText(w) !== undefined && typeFromText(w) === undefined))
    )
      i++;
  }
  return words[i] === undefined ? undefined : typeFromText(words[i] as string);
}

/**
 * An RFC 1035 master file (§5): records one per entry, an entry's lines joined inside `( … )`,
 * `;` comments, `$ORIGIN`, `$TTL` (RFC 2308), `$INCLUDE`, a blank owner for the previous one's,
 * and the SOA's minimum as the TTL of records without one before any $TTL (as BIND and CoreDNS do).
 */
export function parseZoneFile(text: string, options: ZoneFileOptions, depth = 0): DecodedRr[] {
  if (depth > 8) throw new RecordTextError('$INCLUDE nested more than 8 deep');
  const records: DecodedRr[] = [];
  let origin = absoluteName(options.origin, '.');
  let defaultTtl: number | undefined;
  let previousOwner: string | undefined;
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const startLine = i + 1;
    let entry = lines[i] as string;
    // Parentheses (outside quotes and comments) join lines into one entry.
    const open = (s: string) => {
      let depthNow = 0;
      let quoted = false;
      for (let k = 0; k < s.length; k++) {
        const c = s[k];
        if (c === '\\') k++;
        else if (c === '"') quoted = !quoted;
        else if (!quoted && c === ';') {
          while (k < s.length && s[k] !== '\n') k++;
        } else if (!quoted && c === '(') depthNow++;
        else if (!quoted && c === ')') depthNow--;
      }
      return depthNow;
    };
    while (open(entry) > 0 && i + 1 < lines.length) entry += `\n${lines[++i]}`;
    let words: string[];
    try {
      words = recordWords(entry.replace(/;[^\n"]*(?=\n|$)/g, ''));
    } catch (error) {
      fail(startLine, error);
    }
    if (words.length === 0) continue;
    const first = words[0] as string;
    if (first.startsWith('$')) {
      const directive = first.toUpperCase();
      if (directive === '$ORIGIN') origin = absoluteName(words[1] ?? '', origin);
      else if (directive === '$TTL') {
        const ttl = ttlFromText(words[1] ?? '');
        if (ttl === undefined) fail(startLine, `$TTL needs a TTL, got ${JSON.stringify(words[1] ?? '')}`);
        defaultTtl = ttl;
      } else if (directive === '$INCLUDE') {
        if (!options.include || words[1] === undefined) fail(startLine, '$INCLUDE needs a file');
        const included = options.include(words[1]);
        records.push(...parseZoneFile(included, { ...options, origin: words[2] ?? origin }, depth + 1));
      } else fail(startLine, `${first} is not a zone file directive ($ORIGIN, $TTL, $INCLUDE are)`);
      continue;
    }
    const blank = /^[ \t]/.test(entry);
    // DNSSEC's records (a signed zone's RRSIG, NSEC, DNSKEY …): skipped, the rest of the zone served unsigned.
    if (isDnssecType(typeOfEntry(words, blank) ?? 0)) {
      if (!blank) previousOwner = absoluteName(first, origin);
      options.onSkipped?.(startLine);
      continue;
    }
    try {
      const soaMinimum = records.find((r) => r.type === 6)?.soa?.minimum;
      const rr = recordOfWords(
        words,
        {
          origin,
          defaultTtl: defaultTtl ?? soaMinimum ?? 3600,
          ...(previousOwner !== undefined ? { previousOwner } : {}),
        },
        blank,
      );
      previousOwner = rr.name;
      records.push(rr);
    } catch (error) {
      fail(startLine, error);
    }
  }
  return records;
}
