import type { Buffer } from 'node:buffer';
import type { AclAction, AclRule } from '@cluster-dns/runtime';
import {
  buildBareResponse,
  cidrContains,
  closestBlock,
  type Fqdn,
  isInZone,
  type Next,
  RCODE,
  type Reply,
  type Stage,
} from '@cluster-dns/wire';
import type { ForwarderRequest } from '../../config/forwarder-request.js';
import type { Asker } from '../autopath/autopath-stage.js';
import { clientEntryOf, clientMapRequest, clientMapZone } from '../autopath/client-map.js';
import type { ScopedAcl } from './acl-rules.js';

export { type ScopedAcl, scopedAcl } from './acl-rules.js';

export type AclCounts = Record<AclAction, number>;

/**
 * A Corefile's `acl` (CoreDNS's acl plugin): the first rule a query matches decides whether it is
 * answered on (allow), REFUSED (block), answered empty (filter) or dropped; a query matching none
 * is allowed. The client is the pod a trusted node cache names, else the sender, so rules by
 * `net` hold behind node caches too. `namespace` (ours) matches the client's namespace in the
 * record-builder's client map, read only when a rule naming namespaces is reached; a client the
 * map does not know matches no namespace. First in the chain after the loop guard: a refused
 * query reaches neither the cache nor autopath.
 */
export class AclStage implements Stage<ForwarderRequest> {
  readonly name = 'acl';
  readonly counts: AclCounts = { allow: 0, block: 0, filter: 0, drop: 0 };
  /** Questions for the client map refused to a client that is neither this host nor a trusted node cache. */
  clientMapRefused = 0;
  private readonly clientMapZone: Fqdn;

  constructor(
    private readonly blocks: () => readonly ScopedAcl[],
    private readonly askerOf: (request: ForwarderRequest) => Asker,
    /** The cluster zone whose client map names namespaces. */
    private readonly clusterZone: Fqdn,
    /** Who may read the client map (which namespace is at which pod address): the trusted node caches, this host. */
    private readonly mayReadClientMap: (sender: string) => boolean = () => false,
  ) {
    this.clientMapZone = clientMapZone(clusterZone);
  }

  serve(request: ForwarderRequest, next: Next<ForwarderRequest>): Reply | Promise<Reply> {
    // The forwarder's own reads (the client map) go on; a step of a pod's search walk is the pod's.
    if (request.ownQuestion && request.walkedFor === undefined) return next(request);
    // The client map says which namespace each pod address is in: for the forwarders' own reads
    // (autopath, acl, the namespace series) and the node caches', not for any pod to list.
    if (isInZone(request.query.key, this.clientMapZone) && !this.mayReadClientMap(request.context.remoteAddress)) {
      this.clientMapRefused++;
      return bare(request, RCODE.REFUSED);
    }
    const rules = this.rulesFor(request.query.key);
    if (rules.length === 0) return next(request);
    const address = request.walkedFor ?? this.askerOf(request).address;
    const qtype = request.query.qtype;
    const candidates = rules.filter(
      (r) =>
        (r.types.length === 0 || r.types.includes(qtype)) &&
        (r.nets.length === 0 || r.nets.some((cidr) => cidrContains(cidr, address))),
    );
    if (candidates.every((r) => r.namespaces.length === 0)) return this.apply(candidates[0]?.action, request, next);
    // A rule by namespace is among them: the client map says which namespace asks (a cache hit mostly).
    const map = next(clientMapRequest(request, address, this.clusterZone));
    const decide = (reply: Reply) => {
      const namespace = clientEntryOf(reply as Buffer | undefined)?.namespace;
      const rule = candidates.find(
        (r) => r.namespaces.length === 0 || (namespace !== undefined && r.namespaces.includes(namespace)),
      );
      return this.apply(rule?.action, request, next);
    };
    return map instanceof Promise ? map.then(decide) : decide(map);
  }

  /**
   * The rules that judge a name, in order: every acl of the block that serves it (the one with its
   * longest key, as CoreDNS picks a block) whose zones hold the name, as CoreDNS chains one acl to
   * the next when none of the first's lines matches; --acl's (zone `.`, a block of their own) first.
   */
  private rulesFor(name: Fqdn): AclRule[] {
    const acls = this.blocks();
    if (acls.length === 0) return [];
    const block = closestBlock(
      acls.filter((a) => !a.flags).map((a) => ({ zones: a.blockZones })),
      name,
    );
    const out: AclRule[] = [];
    for (const acl of acls)
      if ((acl.flags || acl.blockZones === block?.zones) && acl.zones.some((z) => isInZone(name, z)))
        out.push(...acl.rules);
    return out;
  }

  private apply(
    action: AclAction | undefined,
    request: ForwarderRequest,
    next: Next<ForwarderRequest>,
  ): Reply | Promise<Reply> {
    const taken = action ?? 'allow';
    this.counts[taken]++;
    switch (taken) {
      case 'allow':
        return next(request);
      case 'drop':
        return undefined;
      case 'block':
        return bare(request, RCODE.REFUSED);
      case 'filter':
        return bare(request, RCODE.NOERROR);
    }
  }
}

const bare = (request: ForwarderRequest, rcode: number) =>
  buildBareResponse(request.query, rcode, { recursionAvailable: true, udpPayloadBytes: request.udpPayloadBytes });
