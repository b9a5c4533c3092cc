import { Buffer } from 'node:buffer';
import { type DnsRequest, MessageWriter, type ParsedQuery, parseQuery } from '@cluster-dns/wire';
import type { Resolved } from './resolution.js';

/** A request as it goes down the forwarder's chain: the forward stage leaves what it resolved here. */
export interface ForwarderRequest extends DnsRequest {
  /**
   * The upstream's answer, normalised (ID 0, canonical question, no OPT), with the route that gave
   * it: for the stages before, the cache, to keep. Unset when no upstream answered.
   */
  resolved?: Resolved;
  /**
   * Set by the cache stage: it writes the reply from `resolved` (for every asker of a shared
   * question, with the TTLs it keeps), so the stages after it write none and return RESOLVED.
   */
  repliesFromResolved?: true;
  /**
   * A question this forwarder asks on its own behalf (a search walk's step, the client map): no
   * client's address goes upstream with it, so the server behind (a Pod's forwarder behind a node
   * cache) answers it as the name it is, never walking a search path of its own for it.
   */
  ownQuestion?: true;
}

/** The query with another question (same ID, flags and EDNS payload and DO bit), parsed, for the stages after. */
export function queryAs(query: ParsedQuery, name: string, qtype: number): ParsedQuery {
  const writer = new MessageWriter(128).question(name, qtype, query.qclass);
  if (query.edns)
    writer.record(3, { name: '.', type: 41, class: query.edns.udpSize, ttl: query.edns.dnssecOk ? 0x8000 : 0 });
  return parseQuery(writer.finish(query.id, query.raw.readUInt16BE(2)));
}

/** A question of our own beside `request` (ownQuestion): its whole answer, however large, for us to read. */
export function ownRequest(request: DnsRequest, name: string, qtype: number): ForwarderRequest {
  return { ...request, query: queryAs(request.query, name, qtype), limitBytes: 65_535, ownQuestion: true };
}

/**
 * What a stage after the cache returns when `resolved` is set and the cache writes the reply:
 * nothing to read. A miss writes one reply, the cache's, as CoreDNS's cache writes the message.
 */
export const RESOLVED: Buffer = Buffer.alloc(0);
