import { typeName } from '@cluster-dns/wire';
import type { ClusterState } from './cluster-state.js';
import { withSrvWeights } from './service-records.js';

/** The record store as JSON for `GET /cache` (kube-dns has the same endpoint), optionally one name. */
export function dumpStore(state: ClusterState, onlyName?: string) {
  const records: Record<string, unknown[]> = {};
  const filter = onlyName ? onlyName.toLowerCase().replace(/\.?$/, '.') : undefined;
  for (const [name, byOwner] of state.index.entries()) {
    if (filter && name !== filter) continue;
    records[name] = [...byOwner.entries()].flatMap(([owner, rrs]) =>
      withSrvWeights(rrs).map((rr) => ({
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
  return { serial: state.serial, services: state.serviceCount, records: state.index.recordCount, names: records };
}
