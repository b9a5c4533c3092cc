import {
  encodeMessage,
  type Fqdn,
  isInZone,
  type ParsedQuery,
  QCLASS,
  QTYPE,
  type Rr,
  toFqdn,
} from '@cluster-dns/wire';
import type { ZoneView } from './answer-builder.js';
import { serviceKey } from './cluster-model.js';
import { SCHEMA_VERSION } from './cluster-state.js';
import { buildServiceRecords, type RecordSet, withSrvWeights } from './service-records.js';
import { soaRecord } from './zone-records.js';

/** Records per message: small enough that a message stays far below 64 KiB. */
const RECORDS_PER_MESSAGE = 200;

/** Every Service's records (its names, and its PTRs), generated from the store, with its key. */
export function* zoneContents(view: ZoneView): Generator<{ owner: string; records: RecordSet }> {
  const version = toFqdn(`dns-version.${view.zone}`);
  yield {
    owner: '#schema',
    records: new Map([
      [version, [{ name: version, type: QTYPE.TXT, class: QCLASS.IN, ttl: view.ttlSeconds, text: [SCHEMA_VERSION] }]],
    ]),
  };
  for (const service of view.state.allServices()) {
    const owner = serviceKey(service.namespace, service.name);
    yield { owner, records: buildServiceRecords(service, [...view.state.groupsOf(owner)], view) };
  }
}

/** AXFR of the cluster zone (RFC 5936): SOA, every record, SOA, over as many messages as needed. */
export function buildZoneTransfer(view: ZoneView, q: ParsedQuery): Buffer[] {
  const soa = soaRecord(view, view.zone);
  const records: Rr[] = [
    soa,
    { name: view.zone, type: QTYPE.NS, class: 1, ttl: view.ttlSeconds, target: `ns.dns.${view.zone}` },
  ];
  for (const { records: set } of zoneContents(view)) {
    for (const [name, rrs] of set) if (isInZone(name as Fqdn, view.zone)) records.push(...withSrvWeights(rrs));
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
