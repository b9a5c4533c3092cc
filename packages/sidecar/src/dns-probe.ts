import type { Logger } from '@cluster-dns/runtime';
import { ClusterDnsError, QCLASS, queryDns } from '@cluster-dns/wire';
import type { SidecarMetrics } from './metrics.js';
import { startPeriodic } from './periodic.js';
import type { ProbeSpec } from './probe-flag.js';

/** A probe that got a reply without records: kube-dns's own wording, which dashboards match on. */
export class ProbeFailedError extends ClusterDnsError {
  constructor(name: string) {
    super('PROBE_FAILED', `no RRs for domain ${JSON.stringify(name)}`);
  }
}

/** The last result of a probe, as kube-dns's /healthcheck/<label> reports it. */
export interface ProbeStatus {
  isOk: boolean;
  latencySeconds: number;
  err: string;
  /** When the last probe finished (ms since epoch); 0 before the first. */
  checkedAtMs: number;
}

export interface ProbeDeps {
  metrics: SidecarMetrics;
  log: Logger;
  random?: () => number;
}

/**
 * One probe loop: after a random delay within one interval, send a real DNS query (UDP, class IN,
 * RD) every interval with a timeout shorter than it. Success: no transport error and a non-empty
 * answer section (kube-dns does not look at the rcode). Nothing a DNS server answers can throw out
 * of here.
 */
export function startProbe(spec: ProbeSpec, deps: ProbeDeps) {
  const status: ProbeStatus = { isOk: false, latencySeconds: 0, err: 'waiting for first probe', checkedAtMs: 0 };
  const timeoutMs = Math.min(2000, Math.floor(spec.intervalMs * 0.8));
  let lastLoggedError = '';

  const once = async () => {
    const started = performance.now();
    try {
      const reply = await queryDns(spec.server, spec.name, spec.qtype, { qclass: QCLASS.IN, rd: true, timeoutMs });
      if (reply.answers.length === 0) throw new ProbeFailedError(spec.name);
      const latencyMs = performance.now() - started;
      Object.assign(status, { isOk: true, latencySeconds: latencyMs / 1000, err: '', checkedAtMs: Date.now() });
      deps.metrics.probeSucceeded(spec.label, latencyMs);
      if (lastLoggedError) deps.log.info('probe recovered', { probe: spec.label });
      lastLoggedError = '';
    } catch (error) {
      const err = error instanceof Error ? error.message : String(error);
      Object.assign(status, { isOk: false, latencySeconds: 0, err, checkedAtMs: Date.now() });
      deps.metrics.probeFailed(spec.label);
      if (err !== lastLoggedError)
        deps.log.warn('probe failed', { probe: spec.label, server: spec.server, name: spec.name, reason: err });
      lastLoggedError = err;
    }
  };

  const loop = startPeriodic(once, {
    intervalMs: spec.intervalMs,
    firstDelayMs: Math.floor((deps.random ?? Math.random)() * spec.intervalMs),
  });
  return { spec, status, stop: loop.stop };
}

export type RunningProbe = ReturnType<typeof startProbe>;
