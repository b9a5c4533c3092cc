import type { Buffer } from 'node:buffer';
import { randomBytes } from 'node:crypto';
import type { ResourcePosition, StateFingerprint, ZonePosition } from '@cluster-dns/wire';
import type { ResourceName } from './api-feed-protocol.js';

/** The resources our zones are made from, numbered as positions carry them (never renumber). */
const RESOURCE_ID: Partial<Record<ResourceName, number>> = {
  services: 1,
  endpointslices: 2,
  endpoints: 3,
  pods: 4,
  serviceimports: 5,
  servicecidrs: 6,
};

export function clockedResourceId(resource: ResourceName): number | undefined {
  return RESOURCE_ID[resource];
}

/** A resource's progress: every event up to `version` applied, and the objects then. */
type Progress = { readonly version: number; readonly fingerprint?: StateFingerprint };

const sameFingerprint = (a: StateFingerprint | undefined, b: StateFingerprint | undefined) =>
  a !== undefined && b !== undefined && a.count === b.count && a.sum === b.sum;

/**
 * The cluster's clock as this replica has applied it (KEP-5504: resourceVersions are integers
 * that clients may compare). Per resource it keeps three things:
 *
 * - the highest resourceVersion applied, whose sum over the resources is the SOA serial: every
 *   replica that applied the same events counts the same serial, whatever order its watches
 *   delivered them in;
 * - the position (zone-position.ts): the version up to which every event is applied, which the
 *   API worker tells once it holds nothing older, with a fingerprint of the objects at that moment;
 * - the floor: the position the journal reaches back to (the last list, raised as the journal
 *   drops its oldest changes), and the fingerprint of the state listed there, by which a copy made
 *   by another replica before this one listed is still recognised as the same state.
 */
export class ClusterClock {
  /** This process: a position it made itself is answered by its own serials. */
  readonly origin: Buffer = randomBytes(8);
  private readonly highest = new Map<number, number>();
  private readonly at = new Map<number, Progress>();
  private readonly floors = new Map<number, Progress>();
  private readonly wentBack = new Set<number>();
  /** Moves whenever what a position can be answered from changes without a change of the zones. */
  generation = 0;

  /** The sum of the highest versions applied, modulo 2^32. */
  sum(): number {
    let total = 0;
    for (const v of this.highest.values()) total = (total + (v % 0x1_0000_0000)) % 0x1_0000_0000;
    return total;
  }

  /** Whether the API worker has told any resource's progress (the API's versions are integers). */
  hasProgress(): boolean {
    return this.at.size > 0;
  }

  /** An object's change at `version` is applied. */
  applied(resource: ResourceName, version: number): void {
    const id = RESOURCE_ID[resource];
    if (id === undefined) return;
    if (version > (this.highest.get(id) ?? 0)) this.highest.set(id, version);
  }

  /**
   * Every event of `resource` up to `version` is applied (after a list when `listed`: the journal
   * starts there, and changes from before it are not in it).
   */
  progressed(
    resource: ResourceName,
    version: number,
    fingerprint: StateFingerprint | undefined,
    listed: boolean,
  ): void {
    const id = RESOURCE_ID[resource];
    if (id === undefined) return;
    const position = fingerprint ? { version, fingerprint } : { version };
    const before = this.at.get(id);
    // The cluster's clock went back (an etcd restore without --bump-revision): a copy made before
    // it holds versions this replica will never see again, and cannot be told from one a little
    // ahead of it. From now on a copy ahead of this replica gets the whole zone.
    if (listed && before && version < before.version) this.wentBack.add(id);
    this.at.set(id, position);
    if (listed) {
      this.floors.set(id, position);
      this.generation++;
    }
  }

  /** The journal dropped a change of `resource` at `version`: copies from before it are beyond reach. */
  forgetBefore(resource: ResourceName, version: number): void {
    const id = RESOURCE_ID[resource];
    if (id === undefined) return;
    const floor = this.floors.get(id);
    if (!floor || floor.version < version) this.floors.set(id, { version });
    this.generation++;
  }

  /** Where this replica's zones stand, as the next IXFR reply tells the asker. */
  position(): ZonePosition {
    const resources = new Map<number, ResourcePosition>();
    for (const [id, p] of this.at) resources.set(id, { ...p, upto: Math.max(p.version, this.highest.get(id) ?? 0) });
    return { origin: this.origin, resources };
  }

  /** Whether `position` was made by this process (then its serial is one of ours). */
  isOurs(position: ZonePosition): boolean {
    return position.origin.equals(this.origin);
  }

  /**
   * Per resource, the version after which the journal's changes are missing from a copy at
   * `position`; undefined when the journal cannot say (a resource the copy has no position for, or
   * one from before the journal's floor whose state is not the one listed at the floor).
   */
  startsFrom(position: ZonePosition): { from: Map<number, number>; upto: Map<number, number> } | undefined {
    if (this.at.size === 0) return undefined;
    const from = new Map<number, number>();
    const upto = new Map<number, number>();
    for (const id of this.at.keys()) {
      const theirs = position.resources.get(id);
      const floor = this.floors.get(id);
      const ours = this.at.get(id);
      if (!theirs || !floor || !ours) return undefined;
      if (this.wentBack.has(id) && theirs.upto > ours.version) return undefined;
      if (theirs.version >= floor.version) from.set(id, theirs.version);
      // The copy holds exactly the state this replica listed: nothing before the list to add.
      else if (theirs.upto === theirs.version && sameFingerprint(theirs.fingerprint, floor.fingerprint))
        from.set(id, floor.version);
      else return undefined;
      upto.set(id, Math.max(theirs.upto, from.get(id) as number));
    }
    return { from, upto };
  }
}
