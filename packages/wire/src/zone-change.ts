import { Buffer } from 'node:buffer';
import { FLAG, OPCODE, OPCODE_MASK, OPCODE_SHIFT, QCLASS, QTYPE, RCODE, RCODE_MASK } from './constants.js';
import { ClusterDnsError } from './errors.js';
import { type Fqdn, toFqdn } from './fqdn.js';
import { DEFAULT_FLAGS, decodeMessage } from './message.js';
import { MessageWriter } from './message-writer.js';
import { NOTIFY_CHANGES_OPTION } from './notify-changes.js';
import { type EdnsOption, ednsOption, optRecordWithOptions } from './opt-record.js';
import { decodeProgrammingTimes, PROGRAMMING_TIMES_OPTION, type ProgrammedChange } from './programming-times.js';
import type { DecodedRr, SoaRecord } from './records.js';
import { ZONE_POSITION_OPTION } from './zone-position.js';

/**
 * DNS NOTIFY (RFC 1996 §3.7): opcode NOTIFY, AA, the zone's SOA as the question. The serial hint
 * in the answer section is optional and left out: the receiver asks for the difference anyway.
 * Our node caches are also told, in an OPT record, what changed (`changes`: notify-changes.ts's
 * option data) and when the changes were triggered (`times`: programming-times.ts's).
 */
export function buildNotify(id: number, zone: Fqdn, changes?: Buffer, times?: Buffer): Buffer {
  const options: EdnsOption[] = [];
  if (changes) options.push({ code: NOTIFY_CHANGES_OPTION, data: changes });
  if (times?.length) options.push({ code: PROGRAMMING_TIMES_OPTION, data: times });
  const size = 64 + (changes?.length ?? 0) + (times?.length ?? 0);
  const writer = new MessageWriter(size).question(zone, QTYPE.SOA, QCLASS.IN);
  if (options.length) writer.record(3, optRecordWithOptions(options));
  return writer.finish(id, { ...DEFAULT_FLAGS, opcode: OPCODE.NOTIFY, aa: true });
}

/** Whether `reply` acknowledges a NOTIFY: a response, opcode NOTIFY, NOERROR. */
export function isNotifyAck(reply: Buffer): boolean {
  if (reply.length < 12) return false;
  const flags = reply.readUInt16BE(2);
  return (
    (flags & FLAG.QR) !== 0 &&
    (flags & OPCODE_MASK) >> OPCODE_SHIFT === OPCODE.NOTIFY &&
    (flags & RCODE_MASK) === RCODE.NOERROR
  );
}

/**
 * An IXFR query (RFC 1995 §3): the zone, and in the authority section the SOA of the version held.
 * `programmingTimes` asks our record-builder for the changes' trigger times (programming-times.ts)
 * with an empty option in an OPT record; `position` hands back the position its last reply gave
 * (zone-position.ts), so any replica can answer from the copy held.
 */
export function buildIxfrQuery(
  id: number,
  zone: Fqdn,
  serial: number,
  options: { programmingTimes?: boolean; position?: Buffer } = {},
): Buffer {
  const writer = new MessageWriter(128).question(zone, QTYPE.IXFR, QCLASS.IN);
  writer.record(2, {
    name: zone,
    type: QTYPE.SOA,
    class: QCLASS.IN,
    ttl: 0,
    soa: { primary: '.', admin: '.', serial, refresh: 0, retry: 0, expiration: 0, minimum: 0 },
  });
  const ednsOptions: EdnsOption[] = [];
  if (options.programmingTimes) ednsOptions.push({ code: PROGRAMMING_TIMES_OPTION, data: Buffer.alloc(0) });
  if (options.position) ednsOptions.push({ code: ZONE_POSITION_OPTION, data: options.position });
  if (ednsOptions.length) writer.record(3, optRecordWithOptions(ednsOptions));
  return writer.finish(id, DEFAULT_FLAGS);
}

/** The serial of the SOA in an IXFR query's authority section, or undefined when it has none. */
export function ixfrQuerySerial(query: Buffer): number | undefined {
  const soa = decodeMessage(query).authorities.find((r): r is SoaRecord => r.type === QTYPE.SOA);
  return soa?.soa.serial;
}

/**
 * What a zone transfer said: nothing new, these names changed, or here is the whole zone; with
 * the position the copy is at afterwards, when the server gave one (zone-position.ts).
 */
export type ZoneChange = (
  | { readonly kind: 'up-to-date'; readonly serial: number }
  | {
      readonly kind: 'incremental';
      readonly serial: number;
      readonly names: ReadonlySet<Fqdn>;
      /** The trigger times of the EndpointSlice changes it brings, when asked for and given. */
      readonly programmed: readonly ProgrammedChange[];
    }
  | { readonly kind: 'full'; readonly serial: number }
) & { readonly position?: Buffer };

/**
 * Reads the messages of an IXFR reply (RFC 1995 §4) as they come. An IXFR reply is the current
 * SOA, then for each step the old SOA, the records deleted, the new SOA, the records added, and
 * the current SOA again; a single SOA means up to date; a reply whose second record is not a SOA
 * is a whole zone (AXFR form), and reading stops there: a cache flushes instead of reading it all.
 */
export class ZoneChangeReader {
  private serial: number | undefined;
  private seen = 0;
  private soas = 0;
  private readonly names = new Set<Fqdn>();
  private readonly programmed: ProgrammedChange[] = [];
  private outcome: ZoneChange | undefined;
  private position: Buffer | undefined;

  /** Takes one message; true when the transfer is complete (then `result` is set). */
  push(message: Buffer): boolean {
    const decoded = decodeMessage(message);
    if (decoded.flags.rcode !== RCODE.NOERROR)
      throw new ZoneTransferError(`transfer refused: rcode ${decoded.flags.rcode}`);
    const times = ednsOption(message, PROGRAMMING_TIMES_OPTION);
    if (times) this.programmed.push(...decodeProgrammingTimes(times));
    this.position ??= ednsOption(message, ZONE_POSITION_OPTION);
    for (const rr of decoded.answers) if (this.take(rr)) return this.done();
    // A lone SOA in a message of its own: up to date (or a UDP reply telling us to use TCP).
    if (this.seen === 1 && decoded.answers.length === 1 && this.serial !== undefined) {
      this.outcome = { kind: 'up-to-date', serial: this.serial };
      return this.done();
    }
    return false;
  }

  private done(): true {
    if (this.position && this.outcome) this.outcome = { ...this.outcome, position: this.position };
    return true;
  }

  get result(): ZoneChange | undefined {
    return this.outcome;
  }

  private take(rr: DecodedRr): boolean {
    this.seen++;
    if (this.seen === 1) {
      if (rr.type !== QTYPE.SOA) throw new ZoneTransferError('a zone transfer must begin with the SOA');
      this.serial = (rr as SoaRecord).soa.serial;
      return false;
    }
    const serial = this.serial as number;
    if (this.seen === 2 && rr.type !== QTYPE.SOA) {
      this.outcome = { kind: 'full', serial };
      return true;
    }
    if (this.seen === 2 && (rr as SoaRecord).soa.serial === serial) {
      this.outcome = { kind: 'up-to-date', serial };
      return true;
    }
    if (rr.type === QTYPE.SOA) {
      this.soas++;
      // The closing SOA: the current serial again, after an even number of step SOAs.
      if ((rr as SoaRecord).soa.serial === serial && this.soas % 2 === 1 && this.soas > 1) {
        this.outcome = { kind: 'incremental', serial, names: this.names, programmed: this.programmed };
        return true;
      }
      return false;
    }
    this.names.add(toFqdn(rr.name));
    return false;
  }
}

export class ZoneTransferError extends ClusterDnsError {
  constructor(message: string) {
    super('ZONE_TRANSFER_FAILED', message);
  }
}

/**
 * Tells when a zone transfer reply has ended, whatever its form (RFC 1995 §4, RFC 5936 §2.2): a
 * lone SOA (up to date), the whole zone between two copies of its SOA (AXFR form), or the
 * increments, where the current SOA opens, ends the last step's deletions, and closes. For a
 * relay, which passes every message on and must know when to stop reading.
 */
export class TransferEnd {
  /** The serial the transfer brings the zone to: its first SOA's. */
  serial: number | undefined;
  private second: 'soa-older' | 'other' | undefined;
  private seenCurrent = 0;
  private records = 0;

  /** Takes one message; true when the transfer is complete. */
  push(message: Buffer): boolean {
    const decoded = decodeMessage(message);
    if (decoded.flags.rcode !== RCODE.NOERROR) return true;
    for (const rr of decoded.answers) {
      this.records++;
      const soa = rr.type === QTYPE.SOA ? (rr as SoaRecord).soa.serial : undefined;
      if (this.records === 1) {
        if (soa === undefined) throw new ZoneTransferError('a zone transfer must begin with the SOA');
        this.serial = soa;
        this.seenCurrent = 1;
        continue;
      }
      if (this.records === 2) this.second = soa !== undefined && soa !== this.serial ? 'soa-older' : 'other';
      if (soa === this.serial) this.seenCurrent++;
      if (this.seenCurrent === (this.second === 'soa-older' ? 3 : 2)) return true;
    }
    // A first message holding the SOA alone is the up-to-date reply, as ZoneChangeReader reads it.
    return this.records === 1 && decoded.answers.length === 1;
  }
}

/**
 * Whether serial `a` is newer than `b` (RFC 1982 serial arithmetic, 32 bits): a cache behind the
 * zone's server may answer an older SOA, which is no reason to fetch.
 */
export function serialNewer(a: number, b: number): boolean {
  const diff = ((a >>> 0) - (b >>> 0) + 0x1_0000_0000) % 0x1_0000_0000;
  return diff !== 0 && diff < 0x8000_0000;
}
