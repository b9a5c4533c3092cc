import type { Buffer } from 'node:buffer';
import type { QTYPE } from './constants.js';

export interface Soa {
  primary: string;
  admin: string;
  serial: number;
  refresh: number;
  retry: number;
  expiration: number;
  minimum: number;
}

/** Every data field a record can carry; each record type picks its own. */
interface RecordData {
  address: string;
  target: string;
  text: string[];
  priority: number;
  weight: number;
  port: number;
  soa: Soa;
  rdata: Buffer;
}

/**
 * One record type's shape: the header, its own data fields, and every other data field typed
 * `never`, so a record of the wrong shape does not compile and reading `rr.address` on a mixed
 * list is `string | undefined` without a cast.
 */
type Shape<T extends number, K extends keyof RecordData> = {
  name: string;
  type: T;
  class: number;
  ttl: number;
} & Pick<RecordData, K> & { [F in Exclude<keyof RecordData, K>]?: never };

export type ARecord = Shape<typeof QTYPE.A, 'address'>;
export type AaaaRecord = Shape<typeof QTYPE.AAAA, 'address'>;
/** NS, CNAME and PTR: a name in the data. */
export type NameRecord = Shape<typeof QTYPE.NS | typeof QTYPE.CNAME | typeof QTYPE.PTR, 'target'>;
/** MX: `priority` is the preference, `target` the exchange. */
export type MxRecord = Shape<typeof QTYPE.MX, 'priority' | 'target'>;
/** TXT: one entry per character-string. */
export type TxtRecord = Shape<typeof QTYPE.TXT, 'text'>;
export type SrvRecord = Shape<typeof QTYPE.SRV, 'priority' | 'weight' | 'port' | 'target'>;
export type SoaRecord = Shape<typeof QTYPE.SOA, 'soa'>;
/** OPT (RFC 6891): the advertised UDP size lives in `class`, the extended rcode and flags in `ttl`. */
export type OptRecord = Shape<typeof QTYPE.OPT, never>;

/** A record this project builds and encodes. */
export type Rr = ARecord | AaaaRecord | NameRecord | MxRecord | TxtRecord | SrvRecord | SoaRecord | OptRecord;

/** A record of a type not modelled above, read off the wire: its data as raw octets (RFC 3597). */
export type OpaqueRecord = Shape<number, 'rdata'>;

/** What decodeMessage returns: modelled records, or opaque ones. */
export type DecodedRr = Rr | OpaqueRecord;
