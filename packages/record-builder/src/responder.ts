import {
  buildBareResponse,
  type DnsRequest,
  encodeMessage,
  type Fqdn,
  finishFromTemplate,
  type ParsedQuery,
  QCLASS,
  QTYPE,
  RCODE,
  type Reply,
} from '@cluster-dns/wire';
import { type AnswerParts, buildAnswer, type ZoneView, zoneOf } from './answer-builder.js';
import { buildZoneTransfer } from './zone-transfer.js';

export interface ResponderOptions {
  view: ZoneView;
  /** False until the informers have synced: cluster names then get SERVFAIL, not NXDOMAIN. */
  isReady: () => boolean;
  /** Zone transfers (AXFR over TCP) are allowed from these client addresses only. */
  transferAllowed: (address: string) => boolean;
  /** Bound on answers kept for names that change with any update (negative, synthesized). */
  maxVolatileAnswers?: number;
}

export interface Responder {
  /** The query pipeline's handler: a query that passed the checks every server makes. */
  handle(request: DnsRequest): Reply;
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

  return {
    handle(request) {
      const { query: q, context } = request;
      const bare = (rcode: number, authoritative = false) =>
        buildBareResponse(q, rcode, { authoritative, udpPayloadBytes: request.udpPayloadBytes });
      const zone = zoneOf(view, q.key);
      // Not a recursor: names outside our zones are refused, without AA.
      if (!zone) return bare(RCODE.REFUSED);
      if (!options.isReady()) return bare(RCODE.SERVFAIL);
      // Kubernetes names are DNS-1123: a label with an escaped octet cannot exist.
      if (q.key.includes('\\')) return bare(RCODE.NXDOMAIN, true);
      if (q.qtype === QTYPE.AXFR || q.qtype === QTYPE.IXFR) {
        if (context.transport !== 'tcp' || zone !== view.zone || !options.transferAllowed(context.remoteAddress)) {
          return bare(RCODE.REFUSED);
        }
        return buildZoneTransfer(view, q);
      }
      return finishFromTemplate(templateFor(q, zone), q, request.limitBytes, {
        udpPayloadBytes: request.udpPayloadBytes,
      });
    },
    invalidate(names) {
      for (const name of names) stable.delete(name);
      volatile = new Map();
    },
    readyAnswerCount: () => volatile.size + [...stable.values()].reduce((n, m) => n + m.size, 0),
  };
}
