import { Buffer } from 'node:buffer';
import type { DnsRequest } from '@cluster-dns/wire';
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
}

/**
 * What a stage after the cache returns when `resolved` is set and the cache writes the reply:
 * nothing to read. A miss writes one reply, the cache's, as CoreDNS's cache writes the message.
 */
export const RESOLVED: Buffer = Buffer.alloc(0);
