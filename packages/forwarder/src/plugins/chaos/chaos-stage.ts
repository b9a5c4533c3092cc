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
import { answerStatsQuery, isStatsName, type StatsSnapshot } from './chaos-stats.js';

/**
 * dnsmasq's statistics over DNS: a CHAOS TXT query for `cachesize.bind`, `hits.bind` … is answered
 * here from `stats()` (what the kube-dns sidecar polls); any other CHAOS query is REFUSED. Every
 * other class goes on.
 */
export class ChaosStage implements Stage {
  readonly name = 'chaos';
  /** CHAOS queries answered with statistics. */
  answered = 0;

  /** `stats()` may resolve later: with --workers it sums every worker's counts. */
  constructor(private readonly stats: () => StatsSnapshot | Promise<StatsSnapshot>) {}

  serve(request: DnsRequest, next: Next): Reply | Promise<Reply> {
    const q = request.query;
    if (q.qclass !== QCLASS.CH) return next(request);
    const refused = () =>
      buildBareResponse(q, RCODE.REFUSED, { recursionAvailable: true, udpPayloadBytes: request.udpPayloadBytes });
    if (q.qtype !== QTYPE.TXT || !isStatsName(q.key)) return refused();
    const answer = (stats: StatsSnapshot) => {
      const template = answerStatsQuery(q.key, q.qtype, stats);
      if (!template) return refused();
      this.answered++;
      return finishFromTemplate(template, q, request.limitBytes, { udpPayloadBytes: request.udpPayloadBytes });
    };
    const stats = this.stats();
    return stats instanceof Promise ? stats.then(answer) : answer(stats);
  }
}
