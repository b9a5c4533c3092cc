import {
  buildBareResponse,
  buildFormatErrorResponse,
  encodeMessage,
  type Fqdn,
  finishFromTemplate,
  maxResponseBytes,
  type ParsedQuery,
  parseQuery,
  QCLASS,
  QTYPE,
  type QueryContext,
  QueryFormatError,
  RCODE,
  type Reply,
} from '@cluster-dns/wire';
import { type AnswerParts, buildAnswer, type ZoneView, zoneOf } from './answer-builder.js';
import { buildZoneTransfer } from './zone-transfer.js';

export type RequestSystem = 'auth' | 'reverse';

export interface QueryObservation {
  system: RequestSystem;
  qtype: number;
  rcode: number;
  bytes: number;
  transport: 'udp' | 'tcp';
  startedAt: bigint;
  truncated: boolean;
}

export interface ResponderOptions {
  view: ZoneView;
  /** False until the informers have synced: cluster names then get SERVFAIL, not NXDOMAIN. */
  isReady: () => boolean;
  /** Zone transfers (AXFR over TCP) are allowed from these client addresses only. */
  transferAllowed: (address: string) => boolean;
  observe?: (observation: QueryObservation) => void;
  onMalformed?: (error: QueryFormatError, context: QueryContext) => void;
  /** Bound on answers kept for names that change with any update (negative, synthesized). */
  maxVolatileAnswers?: number;
}

export interface Responder {
  handle(raw: Buffer, context: QueryContext): Reply;
  /** Drops the ready answers of these names; every change also drops the volatile ones. */
  invalidate(names: readonly Fqdn[]): void;
  readyAnswerCount(): number;
}

const QR_AA = { qr: true, opcode: 0, aa: true, tc: false, rd: false, ra: false, ad: false, cd: false };

/**
 * Answers queries from ready wire-form replies per (name, type), built on first use and dropped
 * when the store changes, so a query costs a parse of the question, a lookup and a patch.
 */
export function createResponder(options: ResponderOptions): Responder {
  const { view } = options;
  const stable = new Map<Fqdn, Map<number, Buffer>>();
  let volatile = new Map<string, Buffer>();
  const maxVolatile = options.maxVolatileAnswers ?? 20_000;

  const encodeTemplate = (q: ParsedQuery, parts: AnswerParts): Buffer =>
    encodeMessage({
      id: 0,
      flags: { ...QR_AA, rcode: parts.rcode },
      questions: [{ name: q.key, type: q.qtype, class: q.qclass }],
      answers: parts.answers,
      authorities: parts.authorities,
      additionals: parts.additionals,
    });

  const templateFor = (q: ParsedQuery, zone: Fqdn): Buffer => {
    const byType = q.qclass === QCLASS.IN ? stable.get(q.key) : undefined;
    const hit = byType?.get(q.qtype) ?? volatile.get(`${q.key}|${q.qtype}|${q.qclass}`);
    if (hit) return hit;
    const parts = buildAnswer(view, zone, q.key, q.qtype);
    const template = encodeTemplate(q, parts);
    if (parts.stable && q.qclass === QCLASS.IN) {
      if (byType) byType.set(q.qtype, template);
      else stable.set(q.key, new Map([[q.qtype, template]]));
    } else {
      if (volatile.size >= maxVolatile) volatile = new Map();
      volatile.set(`${q.key}|${q.qtype}|${q.qclass}`, template);
    }
    return template;
  };

  const answer = (q: ParsedQuery, context: QueryContext): { reply: Reply; system: RequestSystem; rcode: number } => {
    const zone = zoneOf(view, q.key);
    const system: RequestSystem = zone === undefined || zone === view.zone ? 'auth' : 'reverse';
    const bare = (rcode: number, authoritative = false) => ({
      reply: buildBareResponse(q, rcode, { authoritative }),
      system,
      rcode,
    });
    if (q.opcode !== 0) return bare(RCODE.NOTIMP);
    if (q.edns && q.edns.version > 0) return bare(RCODE.BADVERS);
    if (q.qclass !== QCLASS.IN && q.qclass !== QCLASS.ANY) return bare(RCODE.REFUSED);
    if (!zone) return bare(RCODE.REFUSED);
    if (!options.isReady()) return bare(RCODE.SERVFAIL);
    // Kubernetes names are DNS-1123: a label with an escaped dot or odd octets cannot exist.
    if (q.key.includes('\\')) return bare(RCODE.NXDOMAIN, true);
    if (q.qtype === QTYPE.AXFR || q.qtype === 251) {
      if (context.transport !== 'tcp' || zone !== view.zone || !options.transferAllowed(context.remoteAddress)) {
        return bare(RCODE.REFUSED);
      }
      return { reply: buildZoneTransfer(view, q), system, rcode: RCODE.NOERROR };
    }
    const template = templateFor(q, zone);
    return {
      reply: finishFromTemplate(template, q, maxResponseBytes(q, context.transport)),
      system,
      rcode: template.readUInt16BE(2) & 0xf,
    };
  };

  return {
    handle(raw, context) {
      const startedAt = options.observe ? process.hrtime.bigint() : 0n;
      let q: ParsedQuery;
      try {
        q = parseQuery(raw);
      } catch (error) {
        if (!(error instanceof QueryFormatError)) throw error;
        options.onMalformed?.(error, context);
        return error.headerReadable ? buildFormatErrorResponse(raw) : undefined;
      }
      const { reply, system, rcode } = answer(q, context);
      if (options.observe) {
        const first = Buffer.isBuffer(reply) ? reply : reply?.[0];
        options.observe({
          system,
          qtype: q.qtype,
          rcode,
          bytes: first?.length ?? 0,
          transport: context.transport,
          startedAt,
          truncated: first !== undefined && (first.readUInt16BE(2) & 0x0200) !== 0,
        });
      }
      return reply;
    },
    invalidate(names) {
      for (const name of names) stable.delete(name);
      volatile = new Map();
    },
    readyAnswerCount: () => volatile.size + [...stable.values()].reduce((n, m) => n + m.size, 0),
  };
}
