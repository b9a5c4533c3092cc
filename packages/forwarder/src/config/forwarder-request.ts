import { Buffer } from 'node:buffer';
import {
  type DnsRequest,
  type EdnsOption,
  type Fqdn,
  MessageWriter,
  type ParsedQuery,
  parseQuery,
  type ScannedResponse,
} from '@cluster-dns/wire';
import type { Route } from './route-table.js';

/** What the forward stage resolved: the answer the cache keeps, and where it came from. */
export interface Resolved {
  /** The reply to cache and serve: ID 0, the canonical question, no OPT, RA set, AA clear. */
  readonly wire: Buffer;
  readonly scanned: ScannedResponse;
  /** The route that decided the answer; the cache keeps it only while that route stands. */
  readonly route: Route;
  /**
   * Names the answer came from that it no longer holds (a rewritten question's): the cache indexes
   * its entry under them too, so a pushed change of those names drops it.
   */
  readonly fromNames?: readonly Fqdn[];
  /**
   * Made for one client (the cluster's DNS walked the search path of the pod we named to it, and
   * says so by naming it back): served to that asker, never kept.
   */
  readonly personal?: true;
}

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
  /**
   * What went wrong, noted by the stage that met it (no upstream answered, a template that did not
   * run): the errors plugin logs it, as CoreDNS's logs the error a plugin returns.
   */
  error?: Error;
  /**
   * A step of a pod's search walk (autopath), the first (the pod's own question) included: the pod
   * it is asked for, whom acl judges. Never carried to the cluster's DNS: a node cache that walks
   * sends its steps as its own, or the Pod's forwarder, trusting it, would walk them again.
   */
  walkedFor?: string;
  /**
   * The EDNS0 options the question goes on upstream with, set by a rewrite's edns0 rules (the
   * client's own options never go upstream otherwise).
   */
  ednsOptions?: readonly EdnsOption[];
  /** How many lookups of the plugins' own (server/forwarder.ts) led to this question: bounded, so a loop ends. */
  lookupDepth?: number;
}

/** The query with another question (same ID, flags and EDNS payload and DO bit), parsed, for the stages after. */
export function queryAs(query: ParsedQuery, name: string, qtype: number, qclass = query.qclass): ParsedQuery {
  const writer = new MessageWriter(128).question(name, qtype, qclass);
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
