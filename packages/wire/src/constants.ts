/** Record types this project names (RFC 1035, 3596, 2782, 6891, 5936). */
export const QTYPE = {
  A: 1,
  NS: 2,
  CNAME: 5,
  SOA: 6,
  PTR: 12,
  MX: 15,
  TXT: 16,
  AAAA: 28,
  SRV: 33,
  OPT: 41,
  AXFR: 252,
  ANY: 255,
} as const;

export const QCLASS = { IN: 1, CH: 3, ANY: 255 } as const;

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

export const OPCODE = { QUERY: 0 } as const;

/** Size limits from RFC 1035 §4.2.1 and RFC 6891 §6.2.5. */
export const UDP_LEGACY_MAX_BYTES = 512;
export const EDNS_MAX_UDP_BYTES = 4096;
export const TCP_MAX_BYTES = 65535;
export const HEADER_BYTES = 12;

const TYPE_NAMES = new Map<number, string>(Object.entries(QTYPE).map(([k, v]) => [v, k]));
const RCODE_NAMES = new Map<number, string>(Object.entries(RCODE).map(([k, v]) => [v, k]));

/** "A", "SRV", or "TYPE65" for a type without a name. */
export function typeName(type: number): string {
  return TYPE_NAMES.get(type) ?? `TYPE${type}`;
}

export function rcodeName(rcode: number): string {
  return RCODE_NAMES.get(rcode) ?? `RCODE${rcode}`;
}

/** Parses "A", "srv", "TYPE33" or "33". */
export function typeFromName(name: string): number | undefined {
  const upper = name.toUpperCase();
  if (upper in QTYPE) return QTYPE[upper as keyof typeof QTYPE];
  const m = /^(?:TYPE)?(\d+)$/.exec(upper);
  return m ? Number(m[1]) : undefined;
}
