import type { ChaosConfig } from '@cluster-dns/runtime';
import {
  buildBareResponse,
  type DnsRequest,
  finishFromTemplate,
  type Next,
  QCLASS,
  QTYPE,
  RCODE,
  type Reply,
  replyFromSections,
  type Stage,
} from '@cluster-dns/wire';
import { type BlockScoped, scopedValue } from '../../config/block-scoped.js';
import { answerStatsQuery, isStatsName, type StatsSnapshot } from './chaos-stats.js';

/** This forwarder's version: dnsmasq's `version.bind` statistic, and `chaos` without a VERSION. */
export const VERSION = 'cluster-dns-forwarder-0.1.0';

/** What `chaos` without a VERSION answers, and without AUTHORS. */
export const CHAOS_DEFAULTS = { version: VERSION, authors: ['cluster-dns'] } as const;

export interface ChaosStageDeps {
  /** `stats()` may resolve later: with --workers it sums every worker's counts. */
  stats(): StatsSnapshot | Promise<StatsSnapshot>;
  /** A Corefile's `chaos` per block (none in the kube-dns layout). */
  configs?(): readonly BlockScoped<ChaosConfig>[];
  /** hostname.bind and id.server (the Pod's name in Kubernetes). */
  hostname: string;
}

/**
 * CHAOS TXT, two ways. dnsmasq's statistics (`cachesize.bind`, `hits.bind` …, what the kube-dns
 * sidecar polls) are always answered from `stats()`. A Corefile's `chaos` (coredns/coredns
 * plugin/chaos) adds `version.bind`/`version.server`, `authors.bind` (one TXT per author) and
 * `hostname.bind`/`id.server`, TTL 0. Any other CHAOS query is REFUSED; every other class goes on.
 */
export class ChaosStage implements Stage {
  readonly name = 'chaos';
  /** CHAOS queries answered. */
  answered = 0;

  constructor(private readonly deps: ChaosStageDeps) {}

  serve(request: DnsRequest, next: Next): Reply | Promise<Reply> {
    const q = request.query;
    if (q.qclass !== QCLASS.CH) return next(request);
    const refused = () =>
      buildBareResponse(q, RCODE.REFUSED, { recursionAvailable: true, udpPayloadBytes: request.udpPayloadBytes });
    const chaos = this.deps.configs ? scopedValue(this.deps.configs(), q.key) : undefined;
    if (chaos && q.qtype === QTYPE.TXT) {
      const texts = this.texts(chaos, q.key);
      if (texts) {
        this.answered++;
        const answer = texts.map((text) => ({
          name: q.qname,
          type: QTYPE.TXT,
          class: QCLASS.CH,
          ttl: 0,
          text: [text],
        }));
        return replyFromSections(q, { rcode: RCODE.NOERROR, authoritative: false, answer }, request.limitBytes, {
          udpPayloadBytes: request.udpPayloadBytes,
        });
      }
    }
    if (q.qtype !== QTYPE.TXT || !isStatsName(q.key)) return chaos ? next(request) : refused();
    const answer = (stats: StatsSnapshot) => {
      const template = answerStatsQuery(q.key, q.qtype, stats);
      if (!template) return refused();
      this.answered++;
      return finishFromTemplate(template, q, request.limitBytes, { udpPayloadBytes: request.udpPayloadBytes });
    };
    const stats = this.deps.stats();
    return stats instanceof Promise ? stats.then(answer) : answer(stats);
  }

  /** The TXT strings of a chaos name, authors shuffled as CoreDNS shuffles them; undefined for another name. */
  private texts(chaos: ChaosConfig, name: string): string[] | undefined {
    switch (name) {
      case 'version.bind.':
      case 'version.server.':
        return [chaos.version ?? CHAOS_DEFAULTS.version];
      case 'authors.bind.': {
        const authors = [...(chaos.authors ?? CHAOS_DEFAULTS.authors)];
        for (let i = authors.length - 1; i > 0; i--) {
          const j = Math.floor(Math.random() * (i + 1));
          [authors[i], authors[j]] = [authors[j] as string, authors[i] as string];
        }
        return authors;
      }
      case 'hostname.bind.':
      case 'id.server.':
        return [this.deps.hostname.slice(0, 255)];
      default:
        return undefined;
    }
  }
}
