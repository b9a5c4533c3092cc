import type { Buffer } from 'node:buffer';
import { type Logger, ProgrammingLatency } from '@cluster-dns/runtime';
import {
  closestZone,
  decodeZonePosition,
  type Fqdn,
  isInZone,
  type NotifyChanges,
  type ProgrammedChange,
  parentOf,
  serialNewer,
  type ZoneChange,
} from '@cluster-dns/wire';

/**
 * A zone kept by the names its NOTIFYs carry is still fetched this often (to twice this), when its
 * SOA check comes: the position a fetch gives is what lets another replica answer the next IXFR by what
 * changed (a rollout), and the journals keep minutes of changes.
 */
export const POSITION_REFRESH_MS = 30_000;

export interface ZoneServer {
  readonly host: string;
  readonly port: number;
}

export interface ZoneSyncDeps {
  /** The record-builder a zone's queries go to (the first server of its route), or undefined. */
  serverFor(zone: Fqdn): ZoneServer | undefined;
  /**
   * Every address the zone's queries may go to: NOTIFY is taken from these only. Undefined: from
   * anyone (node-local mode, where the record-builder that notifies is not the server asked).
   */
  allowedSources(zone: Fqdn): readonly string[] | undefined;
  /**
   * IXFR from `serial`, handing back the position the last reply gave (wire's zone-position.ts;
   * transferTcp and ZoneChangeReader, injected so this runs without sockets).
   */
  transfer(server: ZoneServer, zone: Fqdn, serial: number, position: Buffer | undefined): Promise<ZoneChange>;
  /** The zone's SOA serial, asked of the server directly (not through the cache). */
  soaSerial(server: ZoneServer, zone: Fqdn): Promise<number>;
  /** Drops cached entries holding these names; returns how many. */
  evictNames(names: Iterable<Fqdn>): number;
  /** Drops every cached entry in the zone; returns how many. */
  flushZone(zone: Fqdn): number;
  /**
   * Fetch again after these delays when a NOTIFY's fetch found nothing new (node-local mode). The
   * replica that notifies a node cache is not always the one its fetches reach, which may apply
   * the same change a few milliseconds later; without this, the change would wait for the next
   * NOTIFY or SOA check.
   */
  recheckAfterMs?: readonly number[];
  /** The clock the programming latency is read on (ms since the epoch); Date.now by default. */
  now?: () => number;
  log: Logger;
}

/** The hook told each change a zone sync applied. */

/**
 * What zone sync counts: transfers by result, cache entries dropped because a name changed, and
 * the programming latency of the changes it applied (the SLI, from the trigger times the
 * record-builder hands on with each IXFR).
 */
export interface ZoneSyncCounts {
  transfers: Map<ZoneChange['kind'] | 'failed', number>;
  /**
   * NOTIFYs that carried their names (notify-changes.ts): applied (in step: dropped and answered,
   * no fetch), gap (not in step with the last one: fetched), incomplete (too many: fetched).
   */
  carried: Map<'applied' | 'gap' | 'incomplete', number>;
  invalidated: number;
  programming: ProgrammingLatency;
}

/** Counts at zero. */
export function zoneSyncCounts(): ZoneSyncCounts {
  return { transfers: new Map(), carried: new Map(), invalidated: 0, programming: new ProgrammingLatency() };
}

export interface ZoneSync {
  /**
   * A NOTIFY for `zone` from `source`: refused unless the source is one of the zone's servers;
   * else the zone is pushed from now on, and this resolves once its changes are fetched and the
   * stale entries dropped (the NOTIFY is answered then, so the sender times the whole path).
   * With `changes` (the names it carried) in step with the last, the names are dropped and it
   * resolves at once, with no fetch.
   */
  notify(
    zone: Fqdn,
    source: string,
    changes?: NotifyChanges,
    /** The trigger times it carried: timed when its names are applied without a fetch. */
    programmed?: readonly ProgrammedChange[],
  ): Promise<'accepted' | 'refused' | 'failed'>;
  /** True when the name is in a zone whose changes are pushed: its negative answers are safe to cache. */
  isPushed(name: Fqdn): boolean;
  /** SOA check of every pushed zone (on a timer): a lost NOTIFY is caught here. */
  checkAll(): Promise<void>;
  /** Zones pushed, with the serial held. */
  zones(): Array<{ zone: Fqdn; serial: number | undefined }>;
  readonly counts: ZoneSyncCounts;
}

interface ZoneState {
  serial: number | undefined;
  /**
   * Where the copy stands on the cluster's clock, as the record-builder last said: with it, any
   * replica answers the next IXFR, not only the one that made the copy.
   */
  position: Buffer | undefined;
  syncing: Promise<boolean> | undefined;
  again: boolean;
  /** The process that made `position`: a serial of its own chains onto it. */
  positionOrigin: Buffer | undefined;
  /** When the position is next refreshed (a SOA check fetches then, even in step). */
  refreshAtMs: number;
  /**
   * The sender's serial up to which the NOTIFYs' names were dropped, its process, and when the last
   * one in step came. Never the IXFR's serial by itself (a forged NOTIFY can set it): a fetch from
   * it is asked only of the process that made the position held, which knows its own serials.
   */
  told: number | undefined;
  toldOrigin: Buffer | undefined;
  toldAtMs: number;
  /** What the last transfer brought. */
  last: ZoneChange['kind'] | 'failed' | undefined;
  recheck: NodeJS.Timeout | undefined;
}

/**
 * The forwarder's end of push invalidation. A zone becomes pushed on its first NOTIFY from its
 * own server (the record-builder): the zone's cached entries are dropped once and its serial
 * learnt. Each later NOTIFY (or SOA check that sees another serial) fetches an IXFR from the serial
 * held and drops every entry holding a changed name, or one of its ancestors in the zone (a new
 * name turns an NXDOMAIN above it into NODATA); a reply in the whole-zone form flushes the zone.
 * One transfer per zone at a time; a NOTIFY during one makes it go round again.
 */
export function createZoneSync(deps: ZoneSyncDeps): ZoneSync {
  const zones = new Map<Fqdn, ZoneState>();
  const counts = zoneSyncCounts();
  const now = deps.now ?? Date.now;
  const bump = <K>(counted: Map<K, number>, key: K) => counted.set(key, (counted.get(key) ?? 0) + 1);
  const transferred = (result: ZoneChange['kind'] | 'failed') => bump(counts.transfers, result);

  /**
   * Drops the names with their ancestors in the zone (a new name turns an NXDOMAIN above it into
   * NODATA), and the apex always: its SOA carries the serial, which moves with every change, so a
   * cache behind us (a node cache) never reads an old serial here.
   */
  const evict = (zone: Fqdn, changed: Iterable<Fqdn>): number => {
    const names = new Set<Fqdn>([zone]);
    for (const name of changed) {
      for (let n = name; isInZone(n, zone); n = parentOf(n)) {
        names.add(n);
        if (n === zone) break;
      }
    }
    return deps.evictNames(names);
  };
  /**
   * Whether the NOTIFY's names take the copy from where its names stand to the sender's `to`: the
   * same sender, from at or before `told` and to at or after it (a NOTIFY sent again after its
   * answer was lost starts where the last one did).
   */
  const covers = (state: ZoneState, changes: NotifyChanges) =>
    state.told !== undefined &&
    state.toldOrigin?.equals(changes.origin) === true &&
    !serialNewer(changes.from, state.told) &&
    !serialNewer(state.told, changes.to);
  const carried = (result: 'applied' | 'gap' | 'incomplete') => bump(counts.carried, result);

  const once = async (zone: Fqdn, state: ZoneState): Promise<boolean> => {
    const server = deps.serverFor(zone);
    if (!server) return false;
    try {
      if (state.serial === undefined) {
        // Entering push mode: what was cached before is not covered by any journal.
        const serial = await deps.soaSerial(server, zone);
        const dropped = deps.flushZone(zone);
        counts.invalidated += dropped;
        state.serial = serial;
        deps.log.info('zone pushed: cached answers follow its changes', { zone, serial, dropped });
        // Then at once what changed since, as for every later NOTIFY. The serial may have come
        // through a cache behind the zone's server (a node cache asks the Pod's forwarder), and
        // what was asked again since the flush may be older than it: the transfer evicts that.
      }
      // Dropped further by the NOTIFYs' names of the process that made the position: that process
      // answers from there (a small, shared answer); another answers by the position.
      const from =
        state.told !== undefined &&
        state.positionOrigin &&
        state.toldOrigin?.equals(state.positionOrigin) &&
        serialNewer(state.told, state.serial)
          ? state.told
          : state.serial;
      const change = await deps.transfer(server, zone, from, state.position);
      transferred(change.kind);
      state.last = change.kind;
      let dropped = 0;
      if (change.kind === 'full') {
        dropped = deps.flushZone(zone);
      } else if (change.kind === 'incremental') {
        dropped = evict(zone, change.names);
        // Served from here on: what the changes made stale is gone, and the next asker gets them.
        const at = now();
        for (const p of change.programmed) counts.programming.observe(p.kind, p.triggerMs, at);
      }
      counts.invalidated += dropped;
      state.serial = change.serial;
      state.position = change.position;
      state.positionOrigin = change.position && decodeZonePosition(change.position)?.origin;
      // Between one and two POSITION_REFRESH_MS: caches primed together (a record-builder's
      // start) must not all refresh in the same second.
      state.refreshAtMs = now() + POSITION_REFRESH_MS * (1 + Math.random());
      return true;
    } catch (error) {
      transferred('failed');
      state.last = 'failed';
      deps.log.warn('zone transfer failed; the next NOTIFY or SOA check tries again', { zone, err: error });
      return false;
    }
  };

  const sync = (zone: Fqdn, state: ZoneState): Promise<boolean> => {
    if (state.syncing) {
      state.again = true;
      return state.syncing;
    }
    state.syncing = (async () => {
      let ok = false;
      do {
        state.again = false;
        ok = await once(zone, state);
      } while (state.again);
      state.syncing = undefined;
      return ok;
    })();
    return state.syncing;
  };

  let lastCheckMs = 0;
  const recheckAfter = deps.recheckAfterMs ?? [];
  /** Fetches again after each delay in turn while the fetches find nothing new (one chain per zone). */
  const recheck = (zone: Fqdn, state: ZoneState, step: number) => {
    const delay = recheckAfter[step];
    if (delay === undefined || state.recheck) return;
    state.recheck = setTimeout(() => {
      state.recheck = undefined;
      void sync(zone, state).then(() => {
        if (state.last === 'up-to-date') recheck(zone, state, step + 1);
      });
    }, delay);
    state.recheck.unref();
  };

  return {
    counts,
    async notify(zone, source, changes, programmed) {
      const plain = source.replace(/^::ffff:/, '');
      const allowed = deps.allowedSources(zone);
      if (allowed && !allowed.includes(plain)) return 'refused';
      let state = zones.get(zone);
      if (!state) {
        state = {
          serial: undefined,
          position: undefined,
          positionOrigin: undefined,
          refreshAtMs: 0,
          told: undefined,
          toldOrigin: undefined,
          toldAtMs: 0,
          syncing: undefined,
          again: false,
          last: undefined,
          recheck: undefined,
        };
        zones.set(zone, state);
      }
      if (changes && state.serial !== undefined) {
        // Dropped whether or not in step: every range the sender has is carried by some NOTIFY it
        // sends until answered, so a forged one that moved `told` costs a fetch, not a stale name.
        counts.invalidated += evict(zone, changes.names);
        if (changes.complete && covers(state, changes)) {
          const at = now();
          state.told = changes.to;
          state.toldAtMs = at;
          carried('applied');
          for (const p of programmed ?? []) counts.programming.observe(p.kind, p.triggerMs, at);
          return 'accepted';
        }
      }
      if (changes) carried(changes.complete ? 'gap' : 'incomplete');
      const ok = await sync(zone, state);
      if (ok && changes) {
        // Everything up to `from` came by the fetch: the sender's names chain on from `to`.
        const same = state.toldOrigin?.equals(changes.origin);
        if (!same || state.told === undefined || serialNewer(changes.to, state.told)) {
          state.told = changes.to;
          state.toldOrigin = changes.origin;
          state.toldAtMs = now();
        }
      }
      if (ok && state.last === 'up-to-date') recheck(zone, state, 0);
      return ok ? 'accepted' : 'failed';
    },
    isPushed: (name) => closestZone(zones, name)?.serial !== undefined,
    async checkAll() {
      const since = lastCheckMs;
      lastCheckMs = now();
      await Promise.all(
        [...zones].map(async ([zone, state]) => {
          const server = deps.serverFor(zone);
          if (!server || state.serial === undefined || state.syncing) return;
          // Kept by the names its NOTIFYs carry since the last check: nothing was lost (the
          // sender repeats each until answered), so no SOA query, unless the position is old.
          if (state.toldAtMs > since && lastCheckMs < state.refreshAtMs) return;
          try {
            const serial = await deps.soaSerial(server, zone);
            // Only a newer one: a node cache asks through the Pod's forwarder, whose cached SOA may
            // be older. Any other, once positions are given: the serial is then another replica's
            // (the connection reached a new Pod), which may count lower for the same state.
            if (serialNewer(serial, state.serial) || (state.position && serial !== state.serial)) {
              deps.log.info('SOA check: serial moved without a NOTIFY; fetching the changes', {
                zone,
                held: state.serial,
                serial,
              });
              await sync(zone, state);
            }
          } catch (error) {
            deps.log.debug('SOA check failed', { zone, err: error });
          }
        }),
      );
    },
    // The serial up to which changes were dropped: the NOTIFYs' when they came in step.
    zones: () =>
      [...zones].map(([zone, state]) => ({
        zone,
        serial: state.told !== undefined && state.serial !== undefined ? state.told : state.serial,
      })),
  };
}
