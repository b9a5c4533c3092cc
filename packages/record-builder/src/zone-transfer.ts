import { encodeMessage, isInZone, type ParsedQuery, QTYPE, type Rr } from '@cluster-dns/wire';
import { soaRecord, type ZoneView } from './answer-builder.js';
import { withSrvWeights } from './service-records.js';

/** Records per message: small enough that a message stays far below 64 KiB. */
const RECORDS_PER_MESSAGE = 200;

/** AXFR of the cluster zone (RFC 5936): SOA, every record, SOA, over as many messages as needed. */
export function buildZoneTransfer(view: ZoneView, q: ParsedQuery): Buffer[] {
  const soa = soaRecord(view, view.zone);
  const records: Rr[] = [
    soa,
    { name: view.zone, type: QTYPE.NS, class: 1, ttl: view.ttlSeconds, target: `ns.dns.${view.zone}` },
  ];
  for (const [name, byOwner] of view.state.index.entries()) {
    if (!isInZone(name, view.zone)) continue;
    records.push(...withSrvWeights([...byOwner.values()].flat()));
  }
  records.push(soa);
  const messages: Buffer[] = [];
  for (let i = 0; i < records.length; i += RECORDS_PER_MESSAGE) {
    messages.push(
      encodeMessage({
        id: q.id,
        flags: { qr: true, opcode: 0, aa: true, tc: false, rd: q.rd, ra: false, ad: false, cd: false, rcode: 0 },
        questions: i === 0 ? [{ name: q.qname, type: q.qtype, class: q.qclass }] : [],
        answers: records.slice(i, i + RECORDS_PER_MESSAGE),
        authorities: [],
        additionals: [],
      }),
    );
  }
  return messages;
}
