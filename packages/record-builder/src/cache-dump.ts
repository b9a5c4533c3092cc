import { typeName } from '@cluster-dns/wire';
import type { ZoneView } from './answer-builder.js';
import { withSrvWeights } from './service-records.js';
import { zoneContents } from './zone-transfer.js';

/** The records as JSON for `GET /cache` (kube-dns has the same endpoint), optionally one name. */
export function dumpStore(view: ZoneView, onlyName?: string) {
  const names: Record<string, unknown[]> = {};
  const filter = onlyName ? onlyName.toLowerCase().replace(/\.?$/, '.') : undefined;
  let records = 0;
  for (const { owner, records: set } of zoneContents(view)) {
    for (const [name, rrs] of set) {
      records += rrs.length;
      if (filter && name !== filter) continue;
      const list = names[name] ?? [];
      names[name] = list;
      list.push(
        ...withSrvWeights(rrs).map((rr) => ({
          owner,
          type: typeName(rr.type),
          ttl: rr.ttl,
          ...(rr.address ? { address: rr.address } : {}),
          ...(rr.target ? { target: rr.target } : {}),
          ...(rr.port !== undefined ? { port: rr.port, priority: rr.priority, weight: rr.weight } : {}),
          ...(rr.text ? { text: rr.text } : {}),
        })),
      );
    }
  }
  return { serial: view.state.serial, services: view.state.serviceCount, records, names };
}
