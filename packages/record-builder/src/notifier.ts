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
  /**
   * What the NOTIFY tells of the change (wire's notify-changes.ts option data): the names changed
   * from the serial the target last acknowledged (undefined: none yet) to `to`. Node caches only.
   */
  changes?(
    zone: Fqdn,
    from: number | undefined,
    to: number,
  ): { data: Buffer; complete: boolean; to: number; times?: Buffer };
  /**
   * NOTIFYs in flight at once that make their targets fetch (not carrying every name): each costs
   * us a transfer, so a fleet starting together, or far behind, is brought in a few at a time, as
   * BIND's serial-query-rate and transfers-out do, instead of all timing out together.
   */
  maxFetching?: number;
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
   * The targets are sent to together, once per window: in step, they acknowledged the same serial
   * and get the same changes, made once (`changes`).
   */
  minIntervalMs?: number;
  /**
   * Windowed: at most this many NOTIFYs a second on average, so the window grows with the fleet
   * (each costs the sender ~50 µs with its answer, whatever it carries: bench case 9).
   */
  maxPerSecond?: number;
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
   * This replica is going (its lameduck): every target is sent a NOTIFY that makes it fetch once,
   * so the position its copy holds is recent enough for the replica that takes it over, which
   * started before this lameduck, to place it; a node cache kept by NOTIFYs' names otherwise
   * refreshes its position only every 30–60 s. At most maxFetching at a time.
   */
  handOver(): void;
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
  /** Removed by setTargets: an answer still in flight sends nothing more. */
  gone: boolean;
  /** handOver: not up to date, and the next NOTIFY carries no names, until the target has fetched. */
  fetchNext: boolean;
  /**
   * The target answered REFUSED or NOTAUTH: it is not a secondary of this zone (a node cache whose
   * Corefile routes clusterset.local elsewhere). Offered again only at the heartbeat.
   */
  declined: boolean;
}

/**
 * Windowed: a target that failed up to this many times in a row is sent to in every window still
 * (it may have just started); after that, only when its backoff ends.
 */
const FAILURES_BEFORE_BACKOFF = 3;
/** NOTIFYs sent in one loop turn of a window (see flush). */
const SEND_SLICE = 64;

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
    gone: false,
    fetchNext: false,
    declined: false,
  });
  for (const target of options.targets) for (const zone of options.zones) peers.push(peerOf(target, zone));
  /** The serial at each zone's last change; a peer acknowledged at or after it is up to date. */
  const zoneSerial = new Map<Fqdn, number>();
  const upToDate = (peer: Peer) => {
    if (peer.ackedSerial === undefined || peer.fetchNext) return false;
    const last = zoneSerial.get(peer.zone);
    return last === undefined || !serialNewer(last, peer.ackedSerial);
  };
  let stopped = false;
  let started = false;
  let heartbeat: NodeJS.Timeout | undefined;
  /** NOTIFYs in flight that make their targets fetch, and the targets held back, oldest first. */
  let fetching = 0;
  const heldToFetch = new Set<Peer>();
  /** Windowed (minIntervalMs): the next window's sending, and when the last one went. */
  let window: NodeJS.Timeout | undefined;
  let lastWindowMs = Number.NEGATIVE_INFINITY;
  let windowMs = minIntervalMs;
  const flush = () => {
    window = undefined;
    lastWindowMs = now();
    // A target failing for a while waits out its backoff (its retry puts it in a window again).
    const behind = peers.filter(
      (peer) => !peer.declined && !upToDate(peer) && !(peer.retry && peer.failures > FAILURES_BEFORE_BACKOFF),
    );
    windowMs = Math.max(minIntervalMs, options.maxPerSecond ? (behind.length * 1000) / options.maxPerSecond : 0);
    // In slices, a loop turn between: the answers to one slice are read before the next goes, so
    // a thousand come back not all at once into a socket buffer that holds a few hundred.
    // One serial for the window, though changes go on while its slices go: every target in step
    // then gets the same changes, made once.
    const serial = options.serial();
    const slice = (from: number) => {
      if (stopped) return;
      for (let i = from; i < Math.min(from + SEND_SLICE, behind.length); i++) send(behind[i] as Peer, serial);
      if (from + SEND_SLICE < behind.length) setImmediate(slice, from + SEND_SLICE);
    };
    slice(0);
  };
  /** A target behind: sent to with the others at the next window (at once when there is none). */
  const due = (peer: Peer) => {
    if (minIntervalMs <= 0) return send(peer);
    if (window || stopped) return;
    window = setTimeout(flush, Math.max(0, lastWindowMs + windowMs - now()));
    window.unref();
  };

  const send = (peer: Peer, serial = options.serial()) => {
    if (stopped || peer.gone || peer.inFlight) return;
    const changes = options.changes?.(peer.zone, peer.fetchNext ? undefined : peer.ackedSerial, serial);
    const fetches = changes !== undefined && !changes.complete;
    if (fetches && fetching >= (options.maxFetching ?? Number.POSITIVE_INFINITY)) {
      heldToFetch.add(peer);
      return;
    }
    heldToFetch.delete(peer);
    if (fetches) fetching++;
    clearTimeout(peer.retry);
    peer.retry = undefined;
    peer.inFlight = true;
    const sentAt = now();
    peer.lastSentMs = sentAt;
    options.hooks?.onSent?.(peer.target, peer.zone);
    options
      .send(peer.target, buildNotify(randomQueryId(), peer.zone, changes?.data, changes?.times))
      .then((reply) => {
        if (!isNotifyAck(reply)) {
          const rcode = reply.readUInt16BE(2) & 15;
          const message = `NOTIFY for ${peer.zone} answered with rcode ${rcode}`;
          throw rcode === REFUSED || rcode === NOTAUTH ? new DeclinedError(message) : new Error(message);
        }
        peer.failures = 0;
        peer.declined = false;
        if (fetches) peer.fetchNext = false;
        // As far as what it carried went: when not every name fitted, the rest come next.
        peer.ackedSerial = changes?.complete ? changes.to : serial;
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
        // Windowed, in the next window: with the others, so its changes are made once with theirs.
        peer.retry = setTimeout(() => {
          peer.retry = undefined;
          due(peer);
        }, delay);
        peer.retry.unref();
      })
      .finally(() => {
        peer.inFlight = false;
        if (fetches) {
          fetching--;
          // The next held back goes now, in the slot this one freed (not a window later: a
          // lameduck's hand-over must be done within it).
          const next = heldToFetch.values().next().value;
          if (next) {
            heldToFetch.delete(next);
            if (!next.gone && !stopped) send(next);
          }
        }
        // Changed while this one was out: the receiver must come back for the rest.
        if (!stopped && !peer.gone && !peer.retry && !peer.declined && !upToDate(peer)) due(peer);
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
        due(peer);
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
      clearTimeout(window);
      for (const peer of peers) clearTimeout(peer.retry);
    },
    handOver() {
      for (const peer of peers) {
        if (peer.declined || peer.gone) continue;
        // Not up to date until it has fetched: the window (or the fetch cap) takes it from here.
        peer.fetchNext = true;
        due(peer);
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
          heldToFetch.delete(peer);
          clearTimeout(peer.retry);
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
