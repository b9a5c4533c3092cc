import type { Buffer } from 'node:buffer';
import type { Logger } from '@cluster-dns/runtime';
import { buildNotify, type DnsServer, type Fqdn, isNotifyAck, randomQueryId, serialNewer } from '@cluster-dns/wire';

export interface NotifierOptions {
  targets: readonly DnsServer[];
  zones: readonly Fqdn[];
  /** The zones' SOA serial now. */
  serial(): number;
  /** Sends one NOTIFY and resolves with the reply (wire's UDP exchange; injected for tests). */
  send(target: DnsServer, message: Buffer): Promise<Buffer>;
  log: Logger;
  hooks?: {
    onSent?(target: DnsServer, zone: Fqdn): void;
    onFailed?(target: DnsServer, zone: Fqdn): void;
    /** A target answered: the time since the oldest change it now has (the whole propagation). */
    onAcked?(target: DnsServer, zone: Fqdn, latencyMs: number): void;
  };
  /** First retry after this long, doubling up to retryMaxMs (RFC 1996 §3.6: retry until answered). */
  retryBaseMs?: number;
  retryMaxMs?: number;
  /** A NOTIFY this often even without changes, so a restarted receiver learns it is being pushed to. */
  heartbeatMs?: number;
  /**
   * At most one NOTIFY per target and zone this often (node caches: 100 ms). The one that follows
   * covers every change since, so the work per target is bounded by this, not by the change rate.
   */
  minIntervalMs?: number;
  now?: () => number;
}

export interface Notifier {
  /**
   * Zones changed at `atMs` (all of them when not said): tell every target of those, coalescing with
   * what is in flight. A zone not named is not notified: its targets' serial lags, which their SOA
   * check reads as a newer serial and fetches nothing from (an IXFR with no change in the zone).
   */
  changed(atMs: number, zones?: readonly Fqdn[]): void;
  start(): void;
  stop(): void;
  /** Targets × zones not yet acknowledged at the current serial. */
  unacknowledged(): number;
  /**
   * The targets now (node caches come and go): a new one is NOTIFYed at once (once started), so it
   * enters push mode without waiting for a change; one gone is forgotten, its retries cancelled.
   */
  setTargets(targets: readonly DnsServer[]): void;
}

interface Peer {
  readonly target: DnsServer;
  readonly zone: Fqdn;
  ackedSerial: number | undefined;
  /** When the first change after each NOTIFY sent was made: what each answer covers. */
  changes: number[];
  lastSentMs: number;
  inFlight: boolean;
  failures: number;
  retry: NodeJS.Timeout | undefined;
  /** The wait for minIntervalMs to pass since the last NOTIFY. */
  spacing: NodeJS.Timeout | undefined;
  /** Removed by setTargets: an answer still in flight sends nothing more. */
  gone: boolean;
  /**
   * The target answered REFUSED or NOTAUTH: it is not a secondary of this zone (a node cache whose
   * Corefile routes clusterset.local elsewhere). Offered again only at the heartbeat.
   */
  declined: boolean;
}

/** A NOTIFY answered with REFUSED or NOTAUTH (RFC 1996 §4.7: not a secondary of the zone). */
class DeclinedError extends Error {}
const REFUSED = 5;
const NOTAUTH = 9;

/**
 * DNS NOTIFY (RFC 1996) to each forwarder given with --notify, per zone: sent when the zones
 * change, one in flight per target and zone (a burst of changes is one NOTIFY, and the next goes
 * when it is answered if the serial moved meanwhile), retried with capped backoff until answered
 * (a new change cuts the wait short), and repeated every `heartbeatMs`. The forwarder answers after it has dropped what changed, so
 * the time from a change to the answer is the whole propagation.
 */
export function createNotifier(options: NotifierOptions): Notifier {
  const now = options.now ?? Date.now;
  const retryBaseMs = options.retryBaseMs ?? 250;
  const retryMaxMs = options.retryMaxMs ?? 10_000;
  const minIntervalMs = options.minIntervalMs ?? 0;
  let peers: Peer[] = [];
  const peerOf = (target: DnsServer, zone: Fqdn): Peer => ({
    target,
    zone,
    ackedSerial: undefined,
    changes: [],
    lastSentMs: 0,
    inFlight: false,
    failures: 0,
    retry: undefined,
    spacing: undefined,
    gone: false,
    declined: false,
  });
  for (const target of options.targets) for (const zone of options.zones) peers.push(peerOf(target, zone));
  /** The serial at each zone's last change; a peer acknowledged at or after it is up to date. */
  const zoneSerial = new Map<Fqdn, number>();
  const upToDate = (peer: Peer) => {
    if (peer.ackedSerial === undefined) return false;
    const last = zoneSerial.get(peer.zone);
    return last === undefined || !serialNewer(last, peer.ackedSerial);
  };
  let stopped = false;
  let started = false;
  let heartbeat: NodeJS.Timeout | undefined;

  const send = (peer: Peer) => {
    if (stopped || peer.gone || peer.inFlight || peer.spacing) return;
    const early = peer.lastSentMs + minIntervalMs - now();
    if (minIntervalMs > 0 && early > 0) {
      peer.spacing = setTimeout(() => {
        peer.spacing = undefined;
        send(peer);
      }, early);
      peer.spacing.unref();
      return;
    }
    clearTimeout(peer.retry);
    peer.retry = undefined;
    peer.inFlight = true;
    const serial = options.serial();
    const sentAt = now();
    peer.lastSentMs = sentAt;
    options.hooks?.onSent?.(peer.target, peer.zone);
    options
      .send(peer.target, buildNotify(randomQueryId(), peer.zone))
      .then((reply) => {
        if (!isNotifyAck(reply)) {
          const rcode = reply.readUInt16BE(2) & 15;
          const message = `NOTIFY for ${peer.zone} answered with rcode ${rcode}`;
          throw rcode === REFUSED || rcode === NOTAUTH ? new DeclinedError(message) : new Error(message);
        }
        peer.failures = 0;
        peer.declined = false;
        peer.ackedSerial = serial;
        // The receiver has what was changed before this NOTIFY left: the oldest such change timed.
        const covered = peer.changes.filter((t) => t <= sentAt);
        if (covered.length) options.hooks?.onAcked?.(peer.target, peer.zone, now() - (covered[0] as number));
        peer.changes = peer.changes.filter((t) => t > sentAt);
      })
      .catch((error: unknown) => {
        peer.failures++;
        options.hooks?.onFailed?.(peer.target, peer.zone);
        if (error instanceof DeclinedError) {
          // Retrying would be refused again: the heartbeat offers it again, in case that changes.
          if (!peer.declined)
            options.log.warn('NOTIFY refused: the target does not take this zone from us', {
              target: `${peer.target.host}:${peer.target.port}`,
              zone: peer.zone,
              err: error,
            });
          peer.declined = true;
          return;
        }
        const delay = Math.min(retryMaxMs, retryBaseMs * 2 ** Math.min(peer.failures - 1, 16));
        if (peer.failures === 1 || peer.failures % 10 === 0)
          options.log.warn('NOTIFY not answered; retrying', {
            target: `${peer.target.host}:${peer.target.port}`,
            zone: peer.zone,
            failures: peer.failures,
            retryInMs: delay,
            err: error,
          });
        if (peer.gone) return;
        peer.retry = setTimeout(() => send(peer), delay);
        peer.retry.unref();
      })
      .finally(() => {
        peer.inFlight = false;
        // Changed while this one was out: the receiver must come back for the rest.
        if (!stopped && !peer.gone && !peer.retry && !peer.declined && !upToDate(peer)) send(peer);
      });
  };

  return {
    changed(atMs, zones) {
      const serial = options.serial();
      for (const zone of zones ?? options.zones) zoneSerial.set(zone, serial);
      for (const peer of peers) {
        if ((zones && !zones.includes(peer.zone)) || peer.declined) continue;
        const last = peer.changes.at(-1);
        if ((last === undefined || last < peer.lastSentMs) && peer.changes.length < 64) peer.changes.push(atMs);
        // Even while waiting out a retry: a receiver that was not up yet (the Pod's containers
        // start together) or restarted must not learn of this change a backoff late. Still one
        // in flight, and the failure count keeps growing the backoff if it stays silent.
        send(peer);
      }
    },
    start() {
      started = true;
      for (const peer of peers) send(peer);
      if (options.heartbeatMs) {
        heartbeat = setInterval(() => {
          for (const peer of peers) if (!peer.retry) send(peer);
        }, options.heartbeatMs);
        heartbeat.unref();
      }
    },
    stop() {
      stopped = true;
      clearInterval(heartbeat);
      for (const peer of peers) {
        clearTimeout(peer.retry);
        clearTimeout(peer.spacing);
      }
    },
    unacknowledged: () => peers.filter((p) => !p.declined && !upToDate(p)).length,
    setTargets(targets) {
      const key = (t: DnsServer) => `${t.host}#${t.port}`;
      const wanted = new Set(targets.map(key));
      const kept: Peer[] = [];
      for (const peer of peers) {
        if (wanted.has(key(peer.target))) kept.push(peer);
        else {
          peer.gone = true;
          clearTimeout(peer.retry);
          clearTimeout(peer.spacing);
        }
      }
      const have = new Set(kept.map((p) => key(p.target)));
      const added: Peer[] = [];
      for (const target of targets) {
        if (have.has(key(target))) continue;
        have.add(key(target));
        for (const zone of options.zones) added.push(peerOf(target, zone));
      }
      peers = [...kept, ...added];
      if (started) for (const peer of added) send(peer);
    },
  };
}
