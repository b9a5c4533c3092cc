import { Buffer } from 'node:buffer';
import dns2 from 'dns2';
import { EDNS_DO_BIT, FLAG, HEADER_BYTES, OPCODE_MASK, OPCODE_SHIFT, QCLASS, QTYPE, RCODE_MASK } from './constants.js';
import type { DnsFlags } from './dns-flags.js';
import { NameError, QueryFormatError } from './errors.js';
import { canonicalIpv6 } from './ip-address.js';
import { MessageWriter } from './message-writer.js';
import { wireTtl } from './wire-ttl.js';

export type { DnsFlags };

import { labelOctets, readName } from './names-on-wire.js';
import type { DecodedRr, NameRecord, Rr } from './records.js';

const { Packet } = dns2;

export interface Question {
  name: string;
  type: number;
  class: number;
}

/** A message this project builds. */
export interface DnsMessage {
  id: number;
  flags: DnsFlags;
  questions: Question[];
  answers: Rr[];
  authorities: Rr[];
  additionals: Rr[];
}

/** A message read off the wire: records of types not modelled come back opaque. */
export interface DecodedMessage extends Omit<DnsMessage, 'answers' | 'authorities' | 'additionals'> {
  answers: DecodedRr[];
  authorities: DecodedRr[];
  additionals: DecodedRr[];
}

export const DEFAULT_FLAGS: DnsFlags = {
  qr: false,
  opcode: 0,
  aa: false,
  tc: false,
  rd: false,
  ra: false,
  ad: false,
  cd: false,
  rcode: 0,
};

/**
 * A name's text form as dns2 writes it: raw label characters joined by dots. dns2 splits on dots,
 * so a label that holds one cannot go through it; the hot paths write such names themselves.
 */
function toDns2Name(text: string): string {
  const labels = labelOctets(text);
  if (labels.some((l) => l.includes(0x2e))) throw new NameError(text, 'a label holding a dot cannot be encoded here');
  return labels.map((l) => String.fromCharCode(...l)).join('.');
}

function toDns2(rr: Rr): Record<string, unknown> {
  const out: Record<string, unknown> = { name: toDns2Name(rr.name), type: rr.type, class: rr.class, ttl: rr.ttl };
  switch (rr.type) {
    case QTYPE.A:
    case QTYPE.AAAA:
      out.address = rr.address;
      break;
    case QTYPE.CNAME:
    case QTYPE.PTR:
      out.domain = toDns2Name(rr.target);
      break;
    case QTYPE.NS:
      out.ns = toDns2Name(rr.target);
      break;
    case QTYPE.MX:
      Object.assign(out, { priority: rr.priority, exchange: toDns2Name(rr.target) });
      break;
    case QTYPE.TXT:
      out.data = rr.text;
      break;
    case QTYPE.SRV:
      Object.assign(out, { priority: rr.priority, weight: rr.weight, port: rr.port, target: toDns2Name(rr.target) });
      break;
    case QTYPE.SOA:
      Object.assign(out, { ...rr.soa, primary: toDns2Name(rr.soa.primary), admin: toDns2Name(rr.soa.admin) });
      break;
    case QTYPE.OPT:
      Object.assign(out, { name: '', rdata: [] });
      break;
  }
  return out;
}

/**
 * Encodes a whole message with dns2 (names compressed). Costs ~15–20 µs and more per record:
 * for replies built once and kept, error paths and tests, never per query.
 */
export function encodeMessage(message: DnsMessage | DecodedMessage): Buffer {
  const sections = [message.answers, message.authorities, message.additionals] as const;
  // dns2 writes only the types it models and clamps a 32-bit TTL field to 2^31-1 (the OPT's holds
  // the extended rcode and flags): a message carrying an opaque record (RFC 3597) or such a field
  // is written by our own writer, which copies both as they are.
  if (sections.some((list) => list.some((rr) => rr.rdata !== undefined || rr.ttl > 0x7fffffff))) {
    const writer = new MessageWriter(512);
    for (const q of message.questions) writer.question(q.name, q.type, q.class);
    sections.forEach((list, i) => {
      for (const rr of list) writer.record((i + 1) as 1 | 2 | 3, rr);
    });
    return writer.finish(message.id, message.flags);
  }
  const f = message.flags;
  const packet = new Packet({
    id: message.id,
    qr: +f.qr,
    opcode: f.opcode,
    aa: +f.aa,
    tc: +f.tc,
    rd: +f.rd,
    ra: +f.ra,
    z: 0,
    ad: +f.ad,
    cd: +f.cd,
    rcode: f.rcode & RCODE_MASK,
  } as never);
  packet.questions = message.questions.map((q) => ({
    name: toDns2Name(q.name),
    type: q.type,
    class: q.class,
  })) as never;
  packet.answers = (message.answers as Rr[]).map(toDns2) as never;
  packet.authorities = (message.authorities as Rr[]).map(toDns2) as never;
  packet.additionals = (message.additionals as Rr[]).map(toDns2) as never;
  return packet.toBuffer();
}

/** Reads one record's data by its type; records of other types stay opaque (RFC 3597 §5). */
interface RecordHead {
  name: string;
  type: number;
  class: number;
  ttl: number;
}

function readRecordData(raw: Buffer, record: RecordHead, at: number, end: number): DecodedRr {
  const head = { name: record.name, class: record.class, ttl: record.ttl };
  const need = (n: number) => {
    if (at + n > end) throw new QueryFormatError(`record data of type ${record.type} is too short`, true);
  };
  const nameAt = (offset: number) => {
    const { name, end: after } = readName(raw, offset);
    if (after > end) throw new QueryFormatError('a name runs past its record', true);
    return { name, after };
  };
  const done = (rr: DecodedRr, consumed: number): DecodedRr => {
    if (consumed !== end) throw new QueryFormatError(`record data of type ${record.type} has trailing octets`, true);
    return rr;
  };
  switch (record.type) {
    case QTYPE.A:
      need(4);
      return done({ ...head, type: QTYPE.A, address: [...raw.subarray(at, at + 4)].join('.') }, at + 4);
    case QTYPE.AAAA: {
      need(16);
      const groups = Array.from({ length: 8 }, (_, i) => raw.readUInt16BE(at + i * 2).toString(16));
      return done({ ...head, type: QTYPE.AAAA, address: canonicalIpv6(groups.join(':')) }, at + 16);
    }
    case QTYPE.NS:
    case QTYPE.CNAME:
    case QTYPE.PTR: {
      const { name, after } = nameAt(at);
      return done({ ...head, type: record.type as NameRecord['type'], target: name }, after);
    }
    case QTYPE.MX: {
      need(2);
      const { name, after } = nameAt(at + 2);
      return done({ ...head, type: QTYPE.MX, priority: raw.readUInt16BE(at), target: name }, after);
    }
    case QTYPE.SRV: {
      need(6);
      const { name, after } = nameAt(at + 6);
      const [priority, weight, port] = [raw.readUInt16BE(at), raw.readUInt16BE(at + 2), raw.readUInt16BE(at + 4)];
      return done({ ...head, type: QTYPE.SRV, priority, weight, port, target: name }, after);
    }
    case QTYPE.TXT: {
      const text: string[] = [];
      let pos = at;
      while (pos < end) {
        const length = raw[pos] as number;
        if (pos + 1 + length > end) throw new QueryFormatError('a TXT string runs past its record', true);
        text.push(raw.toString('utf8', pos + 1, pos + 1 + length));
        pos += 1 + length;
      }
      return done({ ...head, type: QTYPE.TXT, text }, pos);
    }
    case QTYPE.SOA: {
      const primary = nameAt(at);
      const admin = nameAt(primary.after);
      const p = admin.after;
      if (p + 20 > end) throw new QueryFormatError('SOA record data is too short', true);
      const soa = {
        primary: primary.name,
        admin: admin.name,
        serial: raw.readUInt32BE(p),
        refresh: raw.readUInt32BE(p + 4),
        retry: raw.readUInt32BE(p + 8),
        expiration: raw.readUInt32BE(p + 12),
        minimum: raw.readUInt32BE(p + 16),
      };
      return done({ ...head, type: QTYPE.SOA, soa }, p + 20);
    }
    case QTYPE.OPT:
      // Options are per hop and not modelled; their octets are skipped.
      return { ...head, type: QTYPE.OPT };
    default:
      return { ...head, type: record.type, rdata: Buffer.from(raw.subarray(at, end)) };
  }
}

/**
 * Decodes a whole message exactly: names in their escaped text form, every record type (opaque
 * where not modelled). Trailing octets after the last record are ignored. Throws QueryFormatError.
 */
export function decodeMessage(raw: Buffer): DecodedMessage {
  if (raw.length < HEADER_BYTES) throw new QueryFormatError('shorter than a DNS header', false);
  const flags = raw.readUInt16BE(2);
  const counts = [raw.readUInt16BE(4), raw.readUInt16BE(6), raw.readUInt16BE(8), raw.readUInt16BE(10)] as const;
  let pos = HEADER_BYTES;
  const questions: Question[] = [];
  for (let i = 0; i < counts[0]; i++) {
    const { name, end } = readName(raw, pos);
    if (end + 4 > raw.length) throw new QueryFormatError('question runs past the end of the message', true);
    questions.push({ name, type: raw.readUInt16BE(end), class: raw.readUInt16BE(end + 2) });
    pos = end + 4;
  }
  const sections: DecodedRr[][] = [[], [], []];
  for (let s = 0; s < 3; s++) {
    for (let i = 0; i < (counts[s + 1] as number); i++) {
      const { name, end } = readName(raw, pos);
      if (end + 10 > raw.length) throw new QueryFormatError('record runs past the end of the message', true);
      const rdlength = raw.readUInt16BE(end + 8);
      const dataEnd = end + 10 + rdlength;
      if (dataEnd > raw.length) throw new QueryFormatError('record data runs past the end of the message', true);
      const type = raw.readUInt16BE(end);
      if (type === QTYPE.OPT) {
        // RFC 6891 §6.1.1: one OPT, in the additional section, owned by the root.
        if (s !== 2) throw new QueryFormatError('an OPT record outside the additional section', true);
        if (name !== '.') throw new QueryFormatError('an OPT record not owned by the root', true);
        if (sections[2]?.some((r) => r.type === QTYPE.OPT))
          throw new QueryFormatError('more than one OPT record', true);
      }
      const head = { name, type, class: raw.readUInt16BE(end + 2), ttl: wireTtl(raw, end + 4, type) };
      (sections[s] as DecodedRr[]).push(readRecordData(raw, head, end + 10, dataEnd));
      pos = dataEnd;
    }
  }
  // RFC 6891 §6.1.3: the OPT's TTL carries the upper 8 bits of a 12-bit rcode (BADVERS is 16).
  const opt = sections[2]?.find((r) => r.type === QTYPE.OPT);
  const extendedRcode = opt ? (opt.ttl >>> 24) << 4 : 0;
  return {
    id: raw.readUInt16BE(0),
    flags: {
      qr: (flags & FLAG.QR) !== 0,
      opcode: (flags & OPCODE_MASK) >> OPCODE_SHIFT,
      aa: (flags & FLAG.AA) !== 0,
      tc: (flags & FLAG.TC) !== 0,
      rd: (flags & FLAG.RD) !== 0,
      ra: (flags & FLAG.RA) !== 0,
      ad: (flags & FLAG.AD) !== 0,
      cd: (flags & FLAG.CD) !== 0,
      rcode: extendedRcode | (flags & RCODE_MASK),
    },
    questions,
    answers: sections[0] as DecodedRr[],
    authorities: sections[1] as DecodedRr[],
    additionals: sections[2] as DecodedRr[],
  };
}

/** A query message for our clients and probes. */
export function buildQueryMessage(
  id: number,
  name: string,
  type: number,
  options: { qclass?: number; rd?: boolean; opcode?: number; edns?: { udpSize: number; dnssecOk?: boolean } } = {},
): DnsMessage {
  const additionals: Rr[] = options.edns
    ? [{ name: '.', type: QTYPE.OPT, class: options.edns.udpSize, ttl: options.edns.dnssecOk ? EDNS_DO_BIT : 0 }]
    : [];
  return {
    id,
    flags: { ...DEFAULT_FLAGS, opcode: options.opcode ?? 0, rd: options.rd ?? true },
    questions: [{ name, type, class: options.qclass ?? QCLASS.IN }],
    answers: [],
    authorities: [],
    additionals,
  };
}
