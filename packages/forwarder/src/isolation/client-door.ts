import type { Buffer } from 'node:buffer';
import type { ClientLimits } from '@cluster-dns/runtime';
import {
  answerPlainRefusal,
  type Cidr,
  cidrContains,
  clientAddressOf,
  type Door,
  HEADER_BYTES,
  latin1Of,
  PlainQuestion,
  questionEndOf,
  RCODE,
  readPlainQuery,
  type Transport,
  truncateToQuestion,
} from '@cluster-dns/wire';
import type { ClientTally } from './client-tally.js';
import { TokenBuckets } from './token-buckets.js';

/** What the door did instead of serving, by reason. */
export interface ClientDoorCounts {
  clientRefused: number;
  clientTruncated: number;
  clientDropped: number;
  rrlDropped: number;
  rrlTruncated: number;
  /** Queries whose client was the one a trusted node cache named (--trust-client-address-from). */
  identityCarried: number;
  /** Queries naming a client from an address not trusted to: the name is ignored. */
  identityForged: number;
}

/** Every count of a door at 0: a new door's, or a lane's before its first report. */
export function noDoorCounts(): ClientDoorCounts {
  return {
    clientRefused: 0,
    clientTruncated: 0,
    clientDropped: 0,
    rrlDropped: 0,
    rrlTruncated: 0,
    identityCarried: 0,
    identityForged: 0,
  };
}

/** Addresses (and address-question pairs) tracked at most, each kind: bounded memory, whatever the sources. */
export const MAX_TRACKED_KEYS = 65_536;

/**
 * A client over its rate this long without a break is flooding, not bursting: its excess is then
 * dropped (each refusal was a send, the most a query costs here), the slips still answered.
 */
export const FLOOD_AFTER_MS = 1000;

/**
 * Fairness between clients, before anything reads their queries (wire's Door). Each source
 * address has a token bucket per transport: past it, a query gets REFUSED, or now and then
 * (`slip`) a TC reply, so a real client that merely burst asks again over TCP and is served. A
 * UDP client still over its rate FLOOD_AFTER_MS later (refused at least once a second since) is
 * flooding: its excess is dropped from then on, every `slip`-th still a TC (BIND's response rate
 * limiting does the same). The answers themselves are rate limited too, per address and question,
 * when they are large (response rate limiting against reflection: a spoofed source gets few of
 * them, and now and then a TC it cannot act on). Queries are not parsed: the address is the key,
 * and a refusal is made from the query's octets (answerPlainRefusal); a message that is not a
 * plain query from a client over its rate is dropped.
 */
export class ClientDoor implements Door {
  readonly counts: ClientDoorCounts = noDoorCounts();
  private limits!: ClientLimits;
  private udp!: TokenBuckets;
  private tcp!: TokenBuckets;
  private answers!: TokenBuckets;
  private readonly question = new PlainQuestion();

  constructor(
    limits: ClientLimits,
    private readonly udpPayloadBytes: number,
    private readonly now: () => number,
    /** Who may name the client it asks for (a node cache): --trust-client-address-from. */
    private readonly trustedFrom: readonly Cidr[] = [],
    /** Queries counted per client (--namespace-metrics), or none. */
    readonly tally?: ClientTally,
  ) {
    this.setLimits(limits);
  }

  /**
   * Who a query's limits count: the sender, or the pod a trusted node cache names in wire's
   * CLIENT_ADDRESS_OPTION. A name from anyone else is ignored and counted: a pod cannot spend
   * another's rate, nor escape its own, by naming someone.
   */
  clientOf(message: Buffer, address: string): string {
    // Nobody trusted: the sender, with no object made (this runs for every query).
    if (this.trustedFrom.length === 0) return address;
    const asker = this.askerOf(message, address);
    if (asker.carried) this.counts.identityCarried++;
    else if (asker.forged) this.counts.identityForged++;
    return asker.address;
  }

  /** clientOf, uncounted: who asked, and whether a trusted node cache named it (autopath's asker). */
  askerOf(message: Buffer, address: string): { address: string; carried: boolean; forged?: true } {
    // Nobody trusted (a node cache, or a Pod's forwarder without node caches): no name is ever
    // believed, and none is read. No additional record, no OPT, no option: most queries stop here.
    if (this.trustedFrom.length === 0) return { address, carried: false };
    if (message.length < HEADER_BYTES || (message[10] === 0 && message[11] === 0)) return { address, carried: false };
    const named = clientAddressOf(message);
    if (named === undefined) return { address, carried: false };
    if (this.trustedFrom.some((cidr) => cidrContains(cidr, address))) return { address: named, carried: true };
    return { address, carried: false, forged: true };
  }

  /** Whether this sender may name the client it asks for (--trust-client-address-from): a node cache. */
  trusts(sender: string): boolean {
    return this.trustedFrom.some((cidr) => cidrContains(cidr, sender));
  }

  /** The limits in force now (the flags', or the ConfigMap's `clientLimits` over them). */
  current(): ClientLimits {
    return this.limits;
  }

  /** New limits (a ConfigMap change): every client starts again with a full bucket. */
  setLimits(limits: ClientLimits): void {
    this.limits = limits;
    this.udp = new TokenBuckets(limits.qps, limits.burst, MAX_TRACKED_KEYS);
    this.tcp = new TokenBuckets(limits.tcpQps, limits.tcpBurst, MAX_TRACKED_KEYS);
    this.answers = new TokenBuckets(limits.rrlResponsesPerSecond, limits.rrlResponsesPerSecond, MAX_TRACKED_KEYS);
  }

  /** Addresses with a bucket now, over both transports. */
  trackedClients(): number {
    return this.udp.size + this.tcp.size;
  }

  admit(message: Buffer, address: string, transport: Transport): Buffer | null | undefined {
    const udp = transport === 'udp';
    const rate = udp ? this.limits.qps : this.limits.tcpQps;
    if (rate === 0) {
      if (this.tally) this.tally.count(this.clientOf(message, address));
      return undefined;
    }
    const buckets = udp ? this.udp : this.tcp;
    const nowMs = this.now();
    const client = this.clientOf(message, address);
    this.tally?.count(client);
    const refused = buckets.take(client, nowMs);
    if (refused === 0) return undefined;
    const slip = udp && this.limits.slip > 0 && refused % this.limits.slip === 0;
    if (!slip && udp && buckets.overForMs >= FLOOD_AFTER_MS) {
      this.counts.clientDropped++;
      return null;
    }
    // A response, another opcode, a malformed message: never answered from here (a reply to a
    // reply could bounce between two servers); the client is over its rate anyway.
    if (!readPlainQuery(message, this.question)) return null;
    if (slip) this.counts.clientTruncated++;
    else this.counts.clientRefused++;
    return answerPlainRefusal(message, this.question, RCODE.REFUSED, {
      truncated: slip,
      recursionAvailable: true,
      udpPayloadBytes: this.udpPayloadBytes,
    });
  }

  release(reply: Buffer, address: string): Buffer | null {
    const { rrlResponsesPerSecond, rrlMinBytes, rrlSlip } = this.limits;
    if (rrlResponsesPerSecond === 0 || reply.length < rrlMinBytes) return reply;
    const questionEnd = questionEndOf(reply);
    if (questionEnd < 0) return reply;
    // The question as it goes, in one case: a client cannot dodge the limit by varying it (0x20).
    const key = `${address}|${latin1Of(reply, HEADER_BYTES, questionEnd).toLowerCase()}`;
    const refused = this.answers.take(key, this.now());
    if (refused === 0) return reply;
    if (rrlSlip > 0 && refused % rrlSlip === 0) {
      this.counts.rrlTruncated++;
      return truncateToQuestion(reply, questionEnd);
    }
    this.counts.rrlDropped++;
    return null;
  }
}
