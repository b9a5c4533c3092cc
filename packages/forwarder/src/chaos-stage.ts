import {
  buildBareResponse,
  type DnsRequest,
  finishFromTemplate,
  type Next,
  QCLASS,
  QTYPE,
  RCODE,
  type Reply,
  type Stage,
} from '@cluster-dns/wire';
import { answerStatsQuery, type StatsSnapshot } from './chaos-stats.js';

/**
 * dnsmasq's statistics over DNS: a CHAOS TXT query for `cachesize.bind`, `hits.bind` … is answered
 * here from `stats()` (what the kube-dns sidecar polls); any other CHAOS query is REFUSED. Every
 * other class goes on.
 */
export class ChaosStage implements Stage {
  readonly name = 'chaos';
  /** CHAOS queries answered with statistics. */
  answered = 0;

  constructor(private readonly stats: () => StatsSnapshot) {}

  serve(request: DnsRequest, next: Next): Reply | Promise<Reply> {
    const q = request.query;
    if (q.qclass !== QCLASS.CH) return next(request);
    const template = q.qtype === QTYPE.TXT ? answerStatsQuery(q.key, q.qtype, this.stats()) : undefined;
    if (!template)
      return buildBareResponse(q, RCODE.REFUSED, {
        recursionAvailable: true,
        udpPayloadBytes: request.udpPayloadBytes,
      });
    this.answered++;
    return finishFromTemplate(template, q, request.limitBytes, { udpPayloadBytes: request.udpPayloadBytes });
  }
}
