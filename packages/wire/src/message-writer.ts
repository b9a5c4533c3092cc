import { Buffer } from 'node:buffer';
import { FLAG, HEADER_BYTES, OPCODE_SHIFT, QTYPE, RCODE_MASK } from './constants.js';
import type { DnsFlags } from './dns-flags.js';
import { ipv4ToNumber, ipv6Groups } from './ip-address.js';
import { labelOctets } from './names-on-wire.js';
import type { OpaqueRecord, Rr } from './records.js';

const MAX_POINTER_OFFSET = 0x3fff;

/**
 * Writes a whole message straight into bytes, names compressed (RFC 1035 §4.1.4), for replies
 * built per query or per change, where dns2's encoder costs too much (~2 ms for a 100-record SRV
 * answer). SRV targets are never compressed (RFC 2782). Output decodes to what encodeMessage would
 * give (a property test holds the two together).
 */
export class MessageWriter {
  private buf: Buffer;
  private pos = HEADER_BYTES;
  /** Offsets of names written so far, by their lowercased text from that label on. */
  private readonly names = new Map<string, number>();
  private readonly counts = [0, 0, 0, 0];

  constructor(capacity = 512) {
    this.buf = Buffer.allocUnsafe(Math.max(capacity, HEADER_BYTES));
  }

  get length(): number {
    return this.pos;
  }

  private room(bytes: number): void {
    if (this.pos + bytes <= this.buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.pos + bytes));
    this.buf.copy(next, 0, 0, this.pos);
    this.buf = next;
  }

  private u16(value: number): void {
    this.room(2);
    this.buf.writeUInt16BE(value, this.pos);
    this.pos += 2;
  }

  private u32(value: number): void {
    this.room(4);
    this.buf.writeUInt32BE(value >>> 0, this.pos);
    this.pos += 4;
  }

  /** A name in text form; compressed against earlier names unless `compress` is false. */
  name(text: string, compress = true): void {
    const lower = text.toLowerCase();
    // Escapes, or a character whose lower case is longer (offsets in `lower` would not be `text`'s).
    if (lower.length !== text.length || text.includes('\\')) {
      this.nameByLabels(text, compress);
      return;
    }
    // Built per query for answers of hundreds of records: no split, no label strings. The only
    // strings made are the suffixes looked up, and only while no earlier name matched.
    const dotted = text.length > 0 && text.charCodeAt(text.length - 1) === 0x2e;
    const end = dotted ? text.length - 1 : text.length;
    const key = dotted ? lower : `${lower}.`;
    for (let start = 0; start < end; ) {
      if (compress) {
        const suffix = start === 0 ? key : key.slice(start);
        const at = this.names.get(suffix);
        if (at !== undefined) {
          this.u16(0xc000 | at);
          return;
        }
        if (this.pos <= MAX_POINTER_OFFSET) this.names.set(suffix, this.pos);
      }
      let dot = text.indexOf('.', start);
      if (dot === -1 || dot > end) dot = end;
      this.room(1 + dot - start);
      const buf = this.buf;
      let pos = this.pos;
      buf[pos++] = dot - start;
      // Latin-1, as buf.write(label, 'latin1') would: the low byte of each character.
      for (let i = start; i < dot; i++) buf[pos++] = text.charCodeAt(i);
      this.pos = pos;
      start = dot + 1;
    }
    this.room(1);
    this.buf[this.pos++] = 0;
  }

  /**
   * name() label by label: for names with escapes (`\.`, `\DDD`), and for the rare one whose lower
   * case is longer than itself.
   */
  private nameByLabels(text: string, compress: boolean): void {
    const plain = !text.includes('\\');
    const labels = plain ? undefined : labelOctets(text);
    const parts = plain ? (text === '.' || text === '' ? [] : text.replace(/\.$/, '').split('.')) : undefined;
    const count = plain ? (parts as string[]).length : (labels as number[][]).length;
    let suffix = plain ? `${(parts as string[]).join('.')}.`.toLowerCase() : withDot(text).toLowerCase();
    for (let i = 0; i < count; i++) {
      const at = compress ? this.names.get(suffix) : undefined;
      if (at !== undefined) {
        this.u16(0xc000 | at);
        return;
      }
      if (compress && this.pos <= MAX_POINTER_OFFSET) this.names.set(suffix, this.pos);
      if (plain) {
        const label = (parts as string[])[i] as string;
        this.room(1 + label.length);
        this.buf[this.pos++] = label.length;
        this.pos += this.buf.write(label, this.pos, 'latin1');
        suffix = suffix.slice(label.length + 1);
      } else {
        const label = (labels as number[][])[i] as number[];
        this.room(1 + label.length);
        this.buf[this.pos++] = label.length;
        for (const c of label) this.buf[this.pos++] = c;
        suffix = suffixAfterFirstLabel(suffix);
      }
    }
    this.room(1);
    this.buf[this.pos++] = 0;
  }

  question(name: string, type: number, qclass: number): this {
    this.name(name);
    this.u16(type);
    this.u16(qclass);
    this.counts[0] = (this.counts[0] as number) + 1;
    return this;
  }

  /** One record into section 1 (answer), 2 (authority) or 3 (additional); an opaque one's data as it is. */
  record(section: 1 | 2 | 3, record: Rr | OpaqueRecord): this {
    this.name(record.name);
    const rr = record as Rr;
    this.u16(rr.type);
    this.u16(rr.class);
    this.u32(rr.ttl);
    const lengthAt = this.pos;
    this.u16(0);
    const start = this.pos;
    const opaque = 'rdata' in record ? record.rdata : undefined;
    if (opaque) {
      this.room(opaque.length);
      opaque.copy(this.buf, this.pos);
      this.pos += opaque.length;
    } else
      switch (rr.type) {
        case QTYPE.A:
          this.ipv4(rr.address);
          break;
        case QTYPE.AAAA:
          this.ipv6(rr.address);
          break;
        case QTYPE.NS:
        case QTYPE.CNAME:
        case QTYPE.PTR:
          this.name(rr.target);
          break;
        case QTYPE.MX:
          this.u16(rr.priority);
          this.name(rr.target);
          break;
        case QTYPE.SRV:
          this.u16(rr.priority);
          this.u16(rr.weight);
          this.u16(rr.port);
          this.name(rr.target, false);
          break;
        case QTYPE.TXT:
          for (const text of rr.text) {
            const bytes = Buffer.from(text, 'utf8');
            this.room(1 + bytes.length);
            this.buf[this.pos++] = bytes.length;
            bytes.copy(this.buf, this.pos);
            this.pos += bytes.length;
          }
          break;
        case QTYPE.SOA:
          this.name(rr.soa.primary);
          this.name(rr.soa.admin);
          for (const n of [rr.soa.serial, rr.soa.refresh, rr.soa.retry, rr.soa.expiration, rr.soa.minimum]) this.u32(n);
          break;
        case QTYPE.OPT:
          break;
      }
    this.buf.writeUInt16BE(this.pos - start, lengthAt);
    this.counts[section] = (this.counts[section] as number) + 1;
    return this;
  }

  private ipv4(address: string): void {
    this.u32(ipv4ToNumber(address));
  }

  private ipv6(address: string): void {
    for (const group of ipv6Groups(address)) this.u16(group);
  }

  /** The message: header with these flags and the counts written, then everything added. */
  finish(id: number, flags: DnsFlags | number): Buffer {
    const word = typeof flags === 'number' ? flags : flagsWord(flags);
    this.buf.writeUInt16BE(id, 0);
    this.buf.writeUInt16BE(word, 2);
    for (let i = 0; i < 4; i++) this.buf.writeUInt16BE(this.counts[i] as number, 4 + i * 2);
    return Buffer.from(this.buf.subarray(0, this.pos));
  }
}

/** The flags word of a header. */
export function flagsWord(f: DnsFlags): number {
  let word = (f.opcode << OPCODE_SHIFT) | (f.rcode & RCODE_MASK);
  if (f.qr) word |= FLAG.QR;
  if (f.aa) word |= FLAG.AA;
  if (f.tc) word |= FLAG.TC;
  if (f.rd) word |= FLAG.RD;
  if (f.ra) word |= FLAG.RA;
  if (f.ad) word |= FLAG.AD;
  if (f.cd) word |= FLAG.CD;
  return word;
}

const withDot = (text: string) => (text.endsWith('.') && !text.endsWith('\\.') ? text : `${text}.`);

/** The text of a name from its second label on, escapes respected. */
function suffixAfterFirstLabel(text: string): string {
  for (let i = 0; i < text.length; i++) {
    if (text.charCodeAt(i) === 0x5c) i++;
    else if (text.charCodeAt(i) === 0x2e) return text.slice(i + 1);
  }
  return '';
}
