import { Buffer } from 'node:buffer';
import {
  buildBareResponse,
  type Fqdn,
  ixfrQuerySerial,
  type Next,
  QTYPE,
  RCODE,
  type Reply,
  type Stage,
} from '@cluster-dns/wire';
import type { ZoneView } from './answer-builder.js';
import type { ZoneRequest } from './zone-stage.js';
import { asksProgrammingTimes, incrementalTransfer, positionKey, zoneTransfer } from './zone-transfer.js';

/**
 * Zone transfers, for the forwarders kept fresh by push and for secondaries: AXFR over TCP only,
 * IXFR from the journal (over UDP the current SOA alone, RFC 1995 §2), to allowed addresses only.
 * An IXFR reply is encoded once per question and client serial at the current serial, so a
 * thousand node caches catching up on one change cost one encoding and a thousand copies.
 * Other questions go on.
 */
export class TransferStage implements Stage<ZoneRequest> {
  readonly name = 'transfers';

  constructor(
    private readonly view: ZoneView,
    private readonly allowed: (address: string) => boolean,
    /** `foreign`: an IXFR answered from another replica's (or an earlier process's) position. */
    private readonly onTransfer?: (
      type: 'axfr' | 'ixfr',
      result: 'incremental' | 'full' | 'current',
      foreign?: boolean,
    ) => void,
  ) {}

  serve(request: ZoneRequest, next: Next<ZoneRequest>): Reply | Promise<Reply> {
    const { query: q, context } = request;
    if (q.qtype !== QTYPE.AXFR && q.qtype !== QTYPE.IXFR) return next(request);
    const bare = (rcode: number, authoritative = false) =>
      buildBareResponse(q, rcode, { authoritative, udpPayloadBytes: request.udpPayloadBytes });
    const zone = request.zone as Fqdn;
    if (!this.allowed(context.remoteAddress)) return bare(RCODE.REFUSED);
    if (q.qtype === QTYPE.AXFR) {
      if (context.transport !== 'tcp') return bare(RCODE.REFUSED);
      this.onTransfer?.('axfr', 'full');
      return zoneTransfer(this.view, zone, q);
    }
    const serial = ixfrQuerySerial(q.raw);
    if (serial === undefined) return bare(RCODE.FORMERR, true);
    const from = context.transport === 'tcp' ? serial : this.view.state.serial;
    // Every node cache asks from the same serial after a change: the reply is encoded once.
    const generation = this.view.state.clock.generation;
    if (this.memo.serial !== this.view.state.serial || this.memo.generation !== generation) {
      this.memo = { serial: this.view.state.serial, generation, replies: new Map(), bytes: 0 };
    }
    const key = `${context.transport}|${q.qname}|${q.qclass}|${from}|${asksProgrammingTimes(q)}|${positionKey(this.view, q)}`;
    const kept = this.memo.replies.get(key);
    if (kept) {
      this.onTransfer?.('ixfr', kept.result, kept.foreign);
      return withId(kept.messages, q.id);
    }
    const transfer = incrementalTransfer(this.view, zone, q, from, context.transport === 'tcp');
    this.onTransfer?.('ixfr', transfer.result, transfer.foreign);
    const messages = [...transfer.messages];
    const bytes = messages.reduce((n, m) => n + m.length, 0);
    if (this.memo.bytes + bytes <= MEMO_BYTES) {
      this.memo.replies.set(key, { messages, result: transfer.result, foreign: transfer.foreign });
      this.memo.bytes += bytes;
      return withId(messages, q.id);
    }
    return messages;
  }

  /** IXFR replies made at the current serial, by question and the client's serial. */
  private memo: {
    serial: number;
    /** The clock's (cluster-clock.ts): a list or a dropped change changes what positions get. */
    generation: number;
    replies: Map<string, { messages: Buffer[]; result: 'incremental' | 'full' | 'current'; foreign: boolean }>;
    bytes: number;
  } = { serial: -1, generation: -1, replies: new Map(), bytes: 0 };
}

/** IXFR replies kept for the current serial at most; a zone larger than this is encoded per asker. */
const MEMO_BYTES = 32 * 1048576;

/** Copies of the kept messages with the asker's ID: the kept ones are never handed out. */
function withId(messages: readonly Buffer[], id: number): Buffer[] {
  return messages.map((m) => {
    const copy = Buffer.from(m);
    copy.writeUInt16BE(id, 0);
    return copy;
  });
}
