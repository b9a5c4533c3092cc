import type { Logger } from '@cluster-dns/runtime';
import { ClusterDnsError, QCLASS, QTYPE, queryDns } from '@cluster-dns/wire';
import { DNSMASQ_STATS, type DnsmasqStat, type SidecarMetrics } from './metrics.js';
import { startPeriodic } from './periodic.js';

/** A CHAOS statistics reply that is not what dnsmasq sends. */
export class StatsReplyError extends ClusterDnsError {
  constructor(stat: string, problem: string) {
    super('STATS_INVALID', `${stat}.bind: ${problem}`);
  }
}

/** Reads one `<name>.bind` CHAOS TXT value: exactly one TXT record with one integer string. */
export async function readDnsmasqStat(
  server: { host: string; port: number },
  stat: DnsmasqStat,
  timeoutMs: number,
): Promise<number> {
  const reply = await queryDns(server, `${stat}.bind.`, QTYPE.TXT, { qclass: QCLASS.CH, timeoutMs });
  if (reply.answers.length !== 1) throw new StatsReplyError(stat, `${reply.answers.length} records, expected 1`);
  const [rr] = reply.answers;
  if (rr?.type !== QTYPE.TXT || rr.text?.length !== 1)
    throw new StatsReplyError(stat, 'expected one TXT record with one string');
  const value = rr.text[0] as string;
  if (!/^-?\d+$/.test(value)) throw new StatsReplyError(stat, `${JSON.stringify(value)} is not an integer`);
  // Past 2^53 a number loses its units: such a value is garbage, not a count to add.
  const count = Number(value);
  if (!Number.isSafeInteger(count)) throw new StatsReplyError(stat, `${value} is out of range`);
  return count;
}

/**
 * Polls the forwarder's CHAOS statistics into kube-dns's counters. A round in which any query
 * fails changes nothing but the error counter. Only growth is added, so the counters stay
 * monotonic across a forwarder restart: after a reset, growth counts from the new lower value.
 */
export function startDnsmasqPoller(options: {
  server: { host: string; port: number };
  intervalMs: number;
  metrics: SidecarMetrics;
  log: Logger;
}) {
  const previous = new Map<DnsmasqStat, number>();
  let failing = false;
  const timeoutMs = Math.min(2000, options.intervalMs);

  const round = async () => {
    const values = new Map<DnsmasqStat, number>();
    try {
      for (const stat of DNSMASQ_STATS) values.set(stat, await readDnsmasqStat(options.server, stat, timeoutMs));
    } catch (error) {
      options.metrics.dnsmasqError();
      if (!failing) options.log.warn('forwarder statistics poll failed', { server: options.server, err: error });
      failing = true;
      return;
    }
    if (failing) options.log.info('forwarder statistics poll recovered', { server: options.server });
    failing = false;
    for (const [stat, value] of values) {
      const before = previous.get(stat) ?? 0;
      if (value > before) options.metrics.dnsmasqGrowth(stat, value - before);
      previous.set(stat, Math.max(value, 0));
    }
  };
  const loop = startPeriodic(round, { intervalMs: options.intervalMs, after: 'end' });
  return { pollNow: loop.runNow, stop: loop.stop };
}
