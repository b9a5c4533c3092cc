import type { Buffer } from 'node:buffer';
import {
  answerThroughSearch,
  CLIENT_ADDRESS_OPTION,
  encodeClientAddress,
  type Fqdn,
  finishFromTemplate,
  isInZone,
  type Next,
  QCLASS,
  RCODE,
  type Reply,
  replyRcode,
  type Stage,
} from '@cluster-dns/wire';
import { type ForwarderRequest, ownRequest } from '../../config/forwarder-request.js';
import { clientEntryOf, clientMapRequest } from './client-map.js';
import { type AutopathSettings, type FirstStep, firstStepOf, restOfWalk } from './search-path.js';

export type { AutopathSettings };

/** Who asked: the sender, or the pod a trusted node cache named (`carried`). */
export interface Asker {
  readonly address: string;
  readonly carried: boolean;
}

export interface AutopathCounts {
  /** First steps from a pod with the default search path: walked here. */
  walked: number;
  /** Walks that found the name under a later step: answered with a CNAME to it. */
  found: number;
  /** First steps not walked: the asker unknown, of another namespace, or with a search path of its own. */
  skipped: number;
}

/**
 * Server-side search (CoreDNS's `autopath`). A pod whose resolv.conf is the kubelet's default
 * (ndots:5, `<ns>.svc.<zone> svc.<zone> <zone>`) asks for an outside name four times over before
 * the name itself, each suffix answered NXDOMAIN, for A and AAAA: eight queries and four round
 * trips. When the first of them arrives from such a pod, this walks the rest of its search path
 * here, in the order the pod would, and answers the first question with a CNAME to the name that
 * exists and its records; the pod's resolver follows the CNAME and its walk ends. A name that
 * exists at no step gets the first step's own answer (NXDOMAIN), and the pod walks on as without
 * this. So that it never walks for anyone else, the asker is looked up in the record-builder's
 * client map (`<a-b-c-d>.client.dns.<zone>`, pushed like any name of the zone): its namespace must
 * be the one in the question and its search path the default. Unknown clients, hostNetwork pods
 * and pods with their own dnsConfig are passed on untouched.
 *
 * Before the cache: each step is an ordinary question to the cache (so every step is cached,
 * coalesced and pushed as any other), and the answer made here is never kept under the asked
 * name, where a pod of another namespace asking that name explicitly would find it. An answer
 * made for a pod a node cache named carries the name back (CLIENT_ADDRESS_OPTION), so the node
 * cache does not keep it either.
 */
export class AutopathStage implements Stage<ForwarderRequest> {
  readonly name = 'autopath';
  readonly counts: AutopathCounts = { walked: 0, found: 0, skipped: 0 };

  constructor(
    private readonly settings: AutopathSettings,
    private readonly askerOf: (request: ForwarderRequest) => Asker,
    /**
     * True when this name goes to the cluster zone's own server (the record-builder), under
     * which the Kubernetes DNS schema holds: below the apex only `svc`, `pod`, `dns` and
     * `dns-version`. Undefined: assume nothing, ask every step.
     */
    private readonly servedBySchema?: (name: Fqdn) => boolean,
  ) {}

  serve(request: ForwarderRequest, next: Next<ForwarderRequest>): Reply | Promise<Reply> {
    const q = request.query;
    if (q.qclass !== QCLASS.IN || request.ownQuestion) return next(request);
    const step = firstStepOf(q.key, this.settings.zone);
    if (step === undefined) return next(request);
    return this.walk(request, step, next);
  }

  /**
   * Whether the `<base>.<zone>` step is one the schema rules out: its label below the apex (the
   * last label typed) is none of the schema's. One question fewer to the record-builder per walk
   * (`api.example.com.cluster.local`, `web.other.cluster.local` cannot exist); kept where another
   * route serves the name (a stub domain inside the cluster zone).
   */
  private cannotExist(step: FirstStep, name: Fqdn): boolean {
    if (name !== `${step.base}.${this.settings.zone}` || this.servedBySchema?.(name) !== true) return false;
    return !SCHEMA_TOP.has(step.base.slice(step.base.lastIndexOf('.') + 1));
  }

  private async walk(request: ForwarderRequest, step: FirstStep, next: Next<ForwarderRequest>): Promise<Reply> {
    const { zone, extraSearch } = this.settings;
    const asker = this.askerOf(request);
    // A hit (the asker seen within the TTL) costs nothing here; a miss, one question to the cluster's DNS.
    const entry = clientEntryOf((await next(clientMapRequest(request, asker.address, zone))) as Buffer | undefined);
    if (entry === undefined || entry.namespace !== step.namespace || !entry.searchDefault) {
      this.counts.skipped++;
      return next(request);
    }
    this.counts.walked++;
    const q = request.query;
    // Each step is the pod's question too: an acl after this stage judges it for the pod (coredns#8290).
    const ask = (name: Fqdn) => next({ ...ownRequest(request, name, q.qtype), walkedFor: asker.address });
    const rest = restOfWalk(step, zone, extraSearch);
    // The steps in the cluster's zone are asked at once with the first: they are answered from
    // the record-builder's memory, and kept (negative answers too: the zone is pushed), so a walk
    // costs one round trip to it, not three. The steps outside (the node's domains, the name as
    // typed) are asked only when no cluster step has the name, and then at once too: a name the
    // cluster has is never sent to the upstreams.
    const inZone = rest.filter((name) => isInZone(name, zone) && !this.cannotExist(step, name));
    const outside = rest.filter((name) => !isInZone(name, zone));
    const [first, ...zoneReplies] = await Promise.all([next(request), ...inZone.map(ask)]);
    const inCluster = pickStep(inZone, zoneReplies);
    if (replyRcode(first) !== RCODE.NXDOMAIN) return first;
    if (inCluster === 'failed') return first;
    const found = inCluster ?? pickStep(outside, await Promise.all(outside.map(ask)));
    // At no step, or a failure part way: the first step's NXDOMAIN, and the pod walks on itself, as without us.
    if (found === undefined || found === 'failed') return first;
    this.counts.found++;
    const template = answerThroughSearch({ name: q.key, qtype: q.qtype, qclass: q.qclass }, found.name, found.reply);
    return finishFromTemplate(template, q, request.limitBytes, {
      udpPayloadBytes: request.udpPayloadBytes,
      ...(asker.carried ? { option: { code: CLIENT_ADDRESS_OPTION, data: encodeClientAddress(asker.address) } } : {}),
    });
  }
}

/** The labels directly below a cluster zone that the Kubernetes DNS schema has (spec §2.1; ns.dns ours). */
const SCHEMA_TOP = new Set(['svc', 'pod', 'dns', 'dns-version']);

/** The first step, in the pod's order, whose name exists; 'failed' when one before it failed; undefined at none. */
function pickStep(
  names: readonly Fqdn[],
  replies: readonly Reply[],
): { name: Fqdn; reply: Buffer } | 'failed' | undefined {
  for (let i = 0; i < names.length; i++) {
    const rcode = replyRcode(replies[i]);
    if (rcode === RCODE.NXDOMAIN) continue;
    if (rcode !== RCODE.NOERROR) return 'failed';
    return { name: names[i] as Fqdn, reply: replies[i] as Buffer };
  }
  return undefined;
}
