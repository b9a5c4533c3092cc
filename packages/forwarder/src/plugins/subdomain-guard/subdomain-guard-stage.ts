import type { Logger } from '@cluster-dns/runtime';
import { buildBareResponse, type Fqdn, type Next, RCODE, type Reply, replyRcode, type Stage } from '@cluster-dns/wire';
import type { ForwarderRequest } from '../../config/forwarder-request.js';
import type { RouteTable } from '../../config/route-table.js';
import { ZoneCuts } from './parent-domain.js';

/** Of the answers under one parent in its window, at least this share failed: its upstream is failing (PowerDNS's prsd: 0.8). */
export const FAILURE_RATIO = 0.8;
/** Failures seen at least, before the ratio means anything. */
export const MIN_FAILURES = 20;
/** Parents whose misses are counted at once, at most; past it, the eighth counted first is forgotten. */
export const MAX_PARENTS = 10_000;

export interface SubdomainGuardOptions {
  /** Distinct names missed under one parent within `windowMs` that, with its upstream failing, trip the guard; 0 = off. */
  readonly minMisses: number;
  readonly windowMs: number;
  /** How long a tripped parent's new names are answered SERVFAIL without asking upstream. */
  readonly holdMs: number;
}

interface Window {
  startMs: number;
  /** Distinct names missed, counted up to `minMisses` (enough to know the threshold is crossed). */
  readonly names: Set<Fqdn>;
  failures: number;
  answers: number;
}

/** What the guard counts. */
export interface SubdomainGuardCounts {
  trips: number;
  /** Queries answered SERVFAIL at once because their parent was held. */
  answered: number;
}

/**
 * A random-subdomain ("water torture") defence, between the cache and the forward stage, so it
 * sees misses only. It counts, per parent domain (parent-domain.ts), the distinct names missed
 * and how their upstream questions ended. When one parent has had `minMisses` distinct names
 * missed in its window while at least FAILURE_RATIO of its answers failed (no answer, SERVFAIL,
 * REFUSED), it trips: for `holdMs`, new names under that parent are answered SERVFAIL at once,
 * without asking anyone, as PowerDNS's and Cloudflare's defences do while the target's servers
 * are down. Names still cached are answered by the cache before this stage; every other parent is
 * untouched; a parent whose servers answer (a flood of NXDOMAINs) never trips: the per-client
 * limits are what bound that. The cluster's own zones (`--server` routes: the record-builder,
 * which answers in microseconds) are not guarded: an outage there must not outlast itself.
 * Tripping and clearing are logged; the counts feed /metrics.
 */
export class SubdomainGuardStage implements Stage<ForwarderRequest> {
  readonly name = 'subdomain guard';
  readonly counts: SubdomainGuardCounts = { trips: 0, answered: 0 };
  private readonly windows = new Map<Fqdn, Window>();
  /** Tripped parents, until when. */
  private readonly held = new Map<Fqdn, { untilMs: number }>();
  private readonly cuts = new ZoneCuts();

  constructor(
    private readonly options: SubdomainGuardOptions,
    private readonly deps: {
      routes(): RouteTable;
      log: Logger;
      now(): number;
    },
  ) {}

  serve(request: ForwarderRequest, next: Next<ForwarderRequest>): Reply | Promise<Reply> {
    if (this.options.minMisses === 0) return next(request);
    const q = request.query;
    const route = this.deps.routes().routeFor(q.key);
    if (route.kind !== 'upstream' && route.kind !== 'stub') return next(request);
    const nowMs = this.deps.now();
    const parent = this.cuts.parentOf(q.key, route.domain);
    const held = this.held.get(parent);
    if (held !== undefined) {
      if (held.untilMs > nowMs) {
        this.counts.answered++;
        return buildBareResponse(q, RCODE.SERVFAIL, {
          recursionAvailable: true,
          udpPayloadBytes: request.udpPayloadBytes,
        });
      }
      this.clear(parent);
    }
    const window = this.windowOf(parent, nowMs);
    if (window.names.size < this.options.minMisses) window.names.add(q.key);
    const replied = next(request);
    if (!(replied instanceof Promise)) return replied;
    return replied.then((reply) => {
      this.ended(parent, window, request, reply);
      return reply;
    });
  }

  /** Parents held now (clearing the ones whose hold ran out). */
  heldParents(): number {
    const nowMs = this.deps.now();
    for (const [parent, held] of this.held) if (held.untilMs <= nowMs) this.clear(parent);
    return this.held.size;
  }

  private ended(parent: Fqdn, window: Window, request: ForwarderRequest, reply: Reply): void {
    const resolved = request.resolved;
    if (resolved) this.cuts.learn(resolved.wire, resolved.scanned);
    const rcode = resolved ? resolved.scanned.rcode : replyRcode(reply);
    // REFUSED by our own share (nothing was asked) says nothing about the upstream.
    if (!resolved && rcode === RCODE.REFUSED) return;
    const failed = !resolved || rcode === RCODE.SERVFAIL || rcode === RCODE.REFUSED;
    if (!failed) {
      window.answers++;
      return;
    }
    window.failures++;
    if (
      window.names.size >= this.options.minMisses &&
      window.failures >= MIN_FAILURES &&
      window.failures >= FAILURE_RATIO * (window.failures + window.answers) &&
      !this.held.has(parent) &&
      this.held.size < MAX_PARENTS
    ) {
      this.counts.trips++;
      this.held.set(parent, { untilMs: this.deps.now() + this.options.holdMs });
      this.windows.delete(parent);
      this.deps.log.warn('random-subdomain guard tripped: new names under this domain get SERVFAIL without asking', {
        domain: parent,
        distinctMisses: window.names.size,
        failures: window.failures,
        answers: window.answers,
        holdMs: this.options.holdMs,
      });
    }
  }

  private clear(parent: Fqdn): void {
    this.held.delete(parent);
    this.deps.log.info('random-subdomain guard cleared: names under this domain are asked again', { domain: parent });
  }

  private windowOf(parent: Fqdn, nowMs: number): Window {
    let window = this.windows.get(parent);
    if (window !== undefined && nowMs - window.startMs < this.options.windowMs) return window;
    if (window === undefined && this.windows.size >= MAX_PARENTS) {
      let n = MAX_PARENTS >> 3;
      for (const key of this.windows.keys()) {
        this.windows.delete(key);
        if (--n === 0) break;
      }
    }
    // A new window replaces the old one; the Map keeps the key's first place (fine: it only
    // decides which parents are forgotten first when there are too many).
    window = { startMs: nowMs, names: new Set(), failures: 0, answers: 0 };
    this.windows.set(parent, window);
    return window;
  }
}
