import type { Buffer } from 'node:buffer';
import {
  assembleReply,
  copyRecord,
  type Fqdn,
  HEADER_BYTES,
  isInZone,
  QTYPE,
  readName,
  recordTarget,
  type ScannedRecord,
  type ScannedResponse,
  toFqdn,
} from '@cluster-dns/wire';

/** RFC 6672: a DNAME's owner is an ancestor of the names it answers for. */
const DNAME = 39;

/**
 * A reply with only the records that pertain to its question, as Unbound's scrubber keeps them
 * (and BIND's "additional section data outside the bailiwick" rule): an upstream, or a spoofer
 * that won the race, cannot plant data about other names in our cache, where it would ride along
 * with every hit. Kept:
 * - answers owned by the question's name or a name its CNAME chain leads to (DNAME by an ancestor);
 * - authority NS and SOA owned by the question's name or an ancestor of a chain name, and every
 *   other authority record (NSEC, RRSIG: the owner of a denial proof is not an ancestor);
 * - additional records owned by a name that a kept record points at (NS, MX, SRV targets) or a
 *   chain name.
 * Returns the reply itself when nothing is dropped (the common case: no copy).
 */
export function scrubReply(wire: Buffer, scanned: ScannedResponse, qname: Fqdn): Buffer {
  if (scanned.records.length === 0) return wire;
  const owner = (r: ScannedRecord) => toFqdn(readName(wire, r.start).name);
  const owners = scanned.records.map(owner);
  const chain = new Set<Fqdn>([qname]);
  // The chain grows as CNAMEs are found in any order; at most one pass per CNAME.
  for (let grew = true; grew; ) {
    grew = false;
    scanned.records.forEach((r, i) => {
      if (r.section !== 'answer' || r.type !== QTYPE.CNAME || !chain.has(owners[i] as Fqdn)) return;
      const target = toFqdn(recordTarget(wire, r) as string);
      if (!chain.has(target)) {
        chain.add(target);
        grew = true;
      }
    });
  }
  const underChain = (zone: Fqdn) => [...chain].some((name) => isInZone(name, zone));
  const keep = scanned.records.map((r, i) => {
    const name = owners[i] as Fqdn;
    if (r.section === 'answer') return chain.has(name) || (r.type === DNAME && underChain(name));
    if (r.section === 'authority') return (r.type !== QTYPE.NS && r.type !== QTYPE.SOA) || underChain(name);
    return true;
  });
  const pointedAt = new Set<Fqdn>(chain);
  scanned.records.forEach((r, i) => {
    if (r.section === 'additional' || !keep[i]) return;
    const target = recordTarget(wire, r);
    if (target !== undefined) pointedAt.add(toFqdn(target));
  });
  scanned.records.forEach((r, i) => {
    if (r.section === 'additional') keep[i] = r.type === QTYPE.OPT || pointedAt.has(owners[i] as Fqdn);
  });
  if (keep.every(Boolean)) return wire;
  const sections: [Buffer[], Buffer[], Buffer[]] = [[], [], []];
  const index = { answer: 0, authority: 1, additional: 2 } as const;
  scanned.records.forEach((r, i) => {
    if (keep[i]) sections[index[r.section]].push(copyRecord(wire, r));
  });
  return assembleReply(
    { id: wire.readUInt16BE(0), flags: wire.readUInt16BE(2) },
    wire.subarray(HEADER_BYTES, scanned.questionEnd),
    sections,
  );
}
