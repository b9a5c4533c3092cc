import type { Buffer } from 'node:buffer';
import { encodeMessage, type Fqdn, QCLASS, QTYPE } from '@cluster-dns/wire';

/** What `<name>.bind` CHAOS TXT queries report, as dnsmasq does. */
export interface StatsSnapshot {
  cachesize: number;
  insertions: number;
  evictions: number;
  misses: number;
  hits: number;
  auth: number;
  /** `ip#port queries failures`, one per server. */
  servers: string[];
  version: string;
}

const STATS_NAMES = new Set(['cachesize', 'insertions', 'evictions', 'misses', 'hits', 'auth', 'servers', 'version']);

/** True for the names answerStatsQuery answers (so nothing is summed over workers for any other). */
export function isStatsName(name: Fqdn): boolean {
  return STATS_NAMES.has(/^([a-z]+)\.bind\.$/.exec(name)?.[1] ?? '');
}

/**
 * Answers `cachesize.bind`, `insertions.bind`, `evictions.bind`, `misses.bind`, `hits.bind`,
 * `auth.bind`, `servers.bind` and `version.bind` (CHAOS, TXT): one TXT record, one string each
 * (servers.bind: one string per server), TTL 0, which is what the kube-dns sidecar parses.
 * The reply is a template (ID 0, the canonical question, no OPT) for finishFromTemplate, which adds
 * the asker's ID, case and OPT. Undefined for any other name.
 */
export function answerStatsQuery(name: Fqdn, qtype: number, stats: StatsSnapshot): Buffer | undefined {
  const which = /^([a-z]+)\.bind\.$/.exec(name)?.[1];
  let strings: string[];
  switch (which) {
    case 'cachesize':
    case 'insertions':
    case 'evictions':
    case 'misses':
    case 'hits':
    case 'auth':
      strings = [String(stats[which])];
      break;
    case 'servers':
      strings = stats.servers;
      break;
    case 'version':
      strings = [stats.version];
      break;
    default:
      return undefined;
  }
  return encodeMessage({
    id: 0,
    flags: { qr: true, opcode: 0, aa: true, tc: false, rd: false, ra: true, ad: false, cd: false, rcode: 0 },
    questions: [{ name, type: qtype, class: QCLASS.CH }],
    answers: [{ name, type: QTYPE.TXT, class: QCLASS.CH, ttl: 0, text: strings }],
    authorities: [],
    additionals: [],
  });
}
