import { Buffer } from 'node:buffer';
import { decodeMessage, type Fqdn, QTYPE, RCODE, RCODE_MASK, toFqdn, withoutIpv4Mapping } from '@cluster-dns/wire';
import { type ForwarderRequest, ownRequest } from '../../config/forwarder-request.js';

// The record-builder's client map as the forwarders read it: which namespace asks from an
// address, and whether its search path is the kubelet's default (autopath, acl, the namespace
// series).

/** `client.dns.<zone>`: where the record-builder keeps the client map. */
export const clientMapZone = (zone: Fqdn): Fqdn => toFqdn(`client.dns.${zone}`);

/** `<a-b-c-d>.client.dns.<zone>`: the record-builder's client map entry for an address. */
export function clientMapName(address: string, zone: Fqdn): Fqdn {
  return toFqdn(`${withoutIpv4Mapping(address).replace(/[.:]/g, '-')}.${clientMapZone(zone)}`);
}

/** The forwarder's own question for an address's client map entry, beside a client's request. */
export function clientMapRequest(request: ForwarderRequest, address: string, zone: Fqdn): ForwarderRequest {
  return ownRequest(request, clientMapName(address, zone), QTYPE.TXT);
}

/** Who an address is, as the client map says. */
export interface ClientEntry {
  readonly namespace: string;
  /** The kubelet's default search path (search=default); false for a pod's own dnsConfig. */
  readonly searchDefault: boolean;
  /** The TXT record's TTL as it came: how long the entry may be kept. */
  readonly ttlSeconds: number;
}

/** The client map's reply read: its TXT `namespace=` and `search=`, or undefined (NXDOMAIN, a failure). */
export function clientEntryOf(reply: Buffer | undefined): ClientEntry | undefined {
  if (!Buffer.isBuffer(reply) || reply.length < 12 || (reply.readUInt16BE(2) & RCODE_MASK) !== RCODE.NOERROR)
    return undefined;
  let namespace: string | undefined;
  let searchDefault = false;
  let ttlSeconds = Number.POSITIVE_INFINITY;
  for (const rr of decodeMessage(reply).answers) {
    if (rr.type !== QTYPE.TXT) continue;
    ttlSeconds = Math.min(ttlSeconds, rr.ttl);
    for (const text of rr.text ?? []) {
      if (text.startsWith('namespace=')) namespace = text.slice('namespace='.length);
      else if (text === 'search=default') searchDefault = true;
    }
  }
  return namespace ? { namespace, searchDefault, ttlSeconds } : undefined;
}
