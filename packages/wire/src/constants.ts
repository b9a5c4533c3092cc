/** Record types this project names (RFC 1035, 3596, 2782, 6891, 4034, 1995, 5936, 2845, 2930). */
export const QTYPE = {
  A: 1,
  NS: 2,
  CNAME: 5,
  SOA: 6,
  PTR: 12,
  HINFO: 13,
  MX: 15,
  TXT: 16,
  AAAA: 28,
  SRV: 33,
  OPT: 41,
  RRSIG: 46,
  TKEY: 249,
  TSIG: 250,
  IXFR: 251,
  AXFR: 252,
  ANY: 255,
} as const;

export const QCLASS = { IN: 1, CH: 3, NONE: 254, ANY: 255 } as const;

export const RCODE = {
  NOERROR: 0,
  FORMERR: 1,
  SERVFAIL: 2,
  NXDOMAIN: 3,
  NOTIMP: 4,
  REFUSED: 5,
  /** Extended rcode 16, carried in the OPT record (RFC 6891 §6.1.3). */
  BADVERS: 16,
} as const;

/** Opcodes (RFC 1035 §4.1.1, RFC 1996). */
export const OPCODE = { QUERY: 0, IQUERY: 1, STATUS: 2, NOTIFY: 4, UPDATE: 5 } as const;

/** The bits of the header's flags word (RFC 1035 §4.1.1, RFC 4035 §3.2). */
export const FLAG = {
  QR: 0x8000,
  AA: 0x0400,
  TC: 0x0200,
  RD: 0x0100,
  RA: 0x0080,
  AD: 0x0020,
  CD: 0x0010,
} as const;
/** The DO bit in an OPT record's TTL field (RFC 3225): "DNSSEC answers wanted". */
export const EDNS_DO_BIT = 0x8000;
/** Where the opcode sits in the flags word: `(flags & OPCODE_MASK) >> OPCODE_SHIFT`. */
export const OPCODE_MASK = 0x7800;
export const OPCODE_SHIFT = 11;
export const RCODE_MASK = 0x000f;

/** Size limits from RFC 1035 §4.2.1 and RFC 6891 §6.2.5. */
export const UDP_LEGACY_MAX_BYTES = 512;
/**
 * The UDP payload we advertise and send at most by default: DNS Flag Day 2020's figure, below
 * which no path fragments (dnsmasq and nsd cap here; it is CoreDNS's bufsize default).
 */
export const EDNS_DEFAULT_UDP_BYTES = 1232;
export const TCP_MAX_BYTES = 65535;
export const HEADER_BYTES = 12;
/** A root-owned OPT record without options. */
export const OPT_RECORD_BYTES = 11;

const TYPE_NAMES = new Map<number, string>(Object.entries(QTYPE).map(([k, v]) => [v, k]));
const RCODE_NAMES = new Map<number, string>(Object.entries(RCODE).map(([k, v]) => [v, k]));
const OPCODE_NAMES = new Map<number, string>(Object.entries(OPCODE).map(([k, v]) => [v, k]));

/** "A", "SRV", or "TYPE65" for a type without a name (RFC 3597 §5). */
export function typeName(type: number): string {
  return TYPE_NAMES.get(type) ?? `TYPE${type}`;
}

/**
 * A type as a metric label: its name for the types named here, "other" for the rest, as CoreDNS
 * labels them. A query can carry any of 65,536 types; a label per type would let one client grow
 * every server's metrics without bound.
 */
export function typeLabel(type: number): string {
  return TYPE_NAMES.get(type) ?? 'other';
}

/** An rcode as a metric label: its name, or "other" (the header holds 16, EDNS 4,096). */
export function rcodeLabel(rcode: number): string {
  return RCODE_NAMES.get(rcode) ?? 'other';
}

export function rcodeName(rcode: number): string {
  return RCODE_NAMES.get(rcode) ?? `RCODE${rcode}`;
}

export function opcodeName(opcode: number): string {
  return OPCODE_NAMES.get(opcode) ?? `OPCODE${opcode}`;
}

/** Parses "A", "srv", "TYPE33" or "33". */
export function typeFromName(name: string): number | undefined {
  const upper = name.toUpperCase();
  if (upper in QTYPE) return QTYPE[upper as keyof typeof QTYPE];
  const m = /^(?:TYPE)?(\d+)$/.exec(upper);
  return m ? Number(m[1]) : undefined;
}
