import type { Buffer } from 'node:buffer';
import {
  answerPlainQuery,
  answerThroughSearch,
  CLIENT_ADDRESS_OPTION,
  encodeClientAddress,
  type Fqdn,
  finishFromTemplate,
  HEADER_BYTES,
  isInZone,
  type Next,
  type PlainQuestion,
  QCLASS,
  QTYPE,
  RCODE,
  type Reply,
  readName,
  replyRcode,
  type Stage,
  toFqdn,
} from '@cluster-dns/wire';
import { type ForwarderRequest, ownRequest } from '../../config/forwarder-request.js';
import { type ClientEntry, clientEntryOf, clientMapRequest } from './client-map.js';
import { type KeptHit, KeptWalks } from './kept-walks.js';
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
  /** Of those found, answered from a walk kept for the asker's namespace: no step asked. */
  kept: number;
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
 * name, where a pod of another namespace asking that name explicitly would find it. It is kept
 * beside (KeptWalks), per asking namespace, until its TTL or the cache's next drop, so a warm
 * walked lookup reads it at once. An answer made for a pod a node cache named carries the name
 * back (CLIENT_ADDRESS_OPTION), so the node cache does not keep it either.
 */
export class AutopathStage implements Stage<ForwarderRequest> {
  readonly name = 'autopath';
  readonly counts: AutopathCounts = { walked: 0, found: 0, kept: 0, skipped: 0 };

  constructor(
    private readonly settings: AutopathSettings,
    /** The asker of a query by its octets and sender (door.askerOf): a node cache may name its pod. */
    private readonly askerOf: (raw: Buffer, remoteAddress: string) => Asker,
    /**
     * True when this name goes to the cluster zone's own server (the record-builder), under
     * which the Kubernetes DNS schema holds: below the apex only `svc`, `pod`, `dns` and
     * `dns-version`. Undefined: assume nothing, ask every step.
     */
    private readonly servedBySchema?: (name: Fqdn) => boolean,
    /** Where walked answers are kept; none: every lookup walks (through cached steps). */
    private readonly kept?: KeptWalks,
  ) {}

  serve(request: ForwarderRequest, next: Next<ForwarderRequest>): Reply | Promise<Reply> {
    const q = request.query;
    if (q.qclass !== QCLASS.IN || request.ownQuestion) return next(request);
    const step = firstStepOf(q.key, this.settings.zone);
    if (step === undefined) return next(request);
    return this.walk(request, step, next);
  }

  /**
   * For the express lane: the answer serve() would give from a kept walk, made from the query's
   * octets, or undefined for anything else (not a first step, an asker not kept or of another
   * namespace, a walk not kept, a pod a node cache named, whose answer carries its name back).
   * Counted by countKept once the lane answers with it.
   */
  keptAtOnce(raw: Buffer, question: PlainQuestion, remoteAddress: string, udpPayloadBytes: number): Buffer | undefined {
    const kept = this.kept;
    if (kept === undefined) return undefined;
    const name = toFqdn(readName(raw, HEADER_BYTES).name.toLowerCase());
    const step = firstStepOf(name, this.settings.zone);
    if (step === undefined) return undefined;
    const asker = this.askerOf(raw, remoteAddress);
    if (asker.carried) return undefined;
    const entry = kept.client(asker.address);
    if (!walksFor(entry, step)) return undefined;
    const hit = kept.get(KeptWalks.keyOf(step.namespace, name, question.qtype, question.dnssecOk));
    if (hit === undefined) return undefined;
    return answerPlainQuery(hit.wire, raw, question, udpPayloadBytes, hit.ttlOffsets, hit.remainingSeconds, true);
  }

  /** Counts an answer of keptAtOnce as serve() counts a kept walk. */
  countKept(): void {
    this.counts.walked++;
    this.counts.found++;
    this.counts.kept++;
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

  /** The asker's client map entry, read through the cache: a hit costs nothing; a miss, one question to the cluster's DNS. */
  private async readClient(
    request: ForwarderRequest,
    address: string,
    next: Next<ForwarderRequest>,
  ): Promise<ClientEntry | undefined> {
    const token = this.kept?.token();
    const reply = await next(clientMapRequest(request, address, this.settings.zone));
    const entry = clientEntryOf(reply as Buffer | undefined);
    if (token !== undefined) this.kept?.keepClient(address, entry, reply, token);
    return entry;
  }

  private async walk(request: ForwarderRequest, step: FirstStep, next: Next<ForwarderRequest>): Promise<Reply> {
    const { zone, extraSearch } = this.settings;
    const asker = this.askerOf(request.query.raw, request.context.remoteAddress);
    const kept = this.kept?.client(asker.address);
    const entry = kept === null ? undefined : (kept ?? (await this.readClient(request, asker.address, next)));
    if (!walksFor(entry, step)) {
      this.counts.skipped++;
      return next(request);
    }
    this.counts.walked++;
    const q = request.query;
    const key = KeptWalks.keyOf(step.namespace, q.key, q.qtype, q.edns?.dnssecOk ?? false);
    const hit = this.kept?.get(key);
    const option = asker.carried
      ? { option: { code: CLIENT_ADDRESS_OPTION, data: encodeClientAddress(asker.address) } }
      : {};
    const finish = (template: Buffer, ttl?: KeptHit) =>
      finishFromTemplate(template, q, request.limitBytes, {
        udpPayloadBytes: request.udpPayloadBytes,
        ...(ttl ? { ttlOffsets: ttl.ttlOffsets, ttlSeconds: ttl.remainingSeconds } : {}),
        ...option,
      });
    if (hit !== undefined) {
      this.counts.found++;
      this.counts.kept++;
      return finish(hit.wire, hit);
    }
    // Before any step is asked: a push while they are out must not leave its old answer kept.
    const token = this.kept?.token();
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
    // A cluster step below a name known not to exist does not exist either (RFC 8020): with
    // `com.testns.svc.<zone>` and `com.svc.<zone>` known NXDOMAIN, no `*.com` name is asked of the
    // cluster. Where every cluster step is so known, the outside steps go at once.
    // Only where the record-builder answers (it gives every name with names below it NODATA, as
    // RFC 8020 needs); a stub domain inside the zone is asked as before.
    const cutOf = (name: Fqdn) => {
      const cut = cutAbove(step, name);
      return cut !== undefined && this.servedBySchema?.(cut) === true ? cut : undefined;
    };
    // Each cut looked up once: what is known of it now.
    const cutsOf = new Map(
      [q.key, ...inZone].flatMap((name) => {
        const cut = cutOf(name);
        return cut === undefined ? [] : [[name, cut] as const];
      }),
    );
    const stateOf = new Map([...new Set(cutsOf.values())].map((cut) => [cut, this.kept?.cut(cut)] as const));
    const known = (name: Fqdn) => {
      const cut = cutsOf.get(name);
      return cut !== undefined && stateOf.get(cut) === 'absent';
    };
    const zoneToAsk = inZone.filter((name) => !known(name));
    // The first step too is asked for the pod, not carried on: behind a node cache that walks, the
    // Pod's forwarder (trusting it) would otherwise walk it again, and its answer, made for one pod,
    // would pass this cache by.
    const askFirst = () => next({ ...request, walkedFor: asker.address });
    // The first step is asked with the others unless it is known not to exist; then it is asked
    // only if the walk finds nothing, for the NXDOMAIN the pod walks on from.
    const first = known(q.key) ? undefined : askFirst();
    // The cuts not known yet are learnt beside the steps, at no added wait: once per label and domain.
    const cuts = [...stateOf].filter(([, state]) => state === 'unknown').map(([cut]) => cut);
    const [firstReply, ...replies] = await Promise.all([
      first,
      ...zoneToAsk.map(ask),
      ...cuts.map((cut) => next(ownRequest(request, cut, QTYPE.A))),
    ]);
    if (token !== undefined)
      cuts.forEach((cut, i) => {
        this.kept?.keepCut(cut, replies[zoneToAsk.length + i], token);
      });
    const inCluster = pickStep(zoneToAsk, replies.slice(0, zoneToAsk.length));
    if (firstReply !== undefined && replyRcode(firstReply) !== RCODE.NXDOMAIN) return firstReply;
    // At no step, or a failure part way: the first step's NXDOMAIN, and the pod walks on itself, as without us.
    const notFound = () => firstReply ?? askFirst();
    if (inCluster === 'failed') return notFound();
    const found = inCluster ?? pickStep(outside, await Promise.all(outside.map(ask)));
    if (found === undefined || found === 'failed') return notFound();
    return this.answerFound(found, q, key, token, finish);
  }

  /** The answer through the step that has the name: a CNAME to it and its records, kept for the asker's namespace. */
  private answerFound(
    found: { name: Fqdn; reply: Buffer },
    q: ForwarderRequest['query'],
    key: string,
    token: number | undefined,
    finish: (template: Buffer) => Buffer,
  ): Buffer {
    this.counts.found++;
    const template = answerThroughSearch({ name: q.key, qtype: q.qtype, qclass: q.qclass }, found.name, found.reply);
    if (token !== undefined) this.kept?.keep(key, template, token);
    return finish(template);
  }
}

/**
 * The name a cluster step lies below that is likeliest not to exist, for RFC 8020's cut: the last
 * label typed under the step's search domain (`com.testns.svc.<zone>` for the step
 * `api.example.com.testns.svc.<zone>`, `com.svc.<zone>` for `api.example.com.svc.<zone>`), or
 * undefined when what was typed is one label (the step is that name itself).
 */
function cutAbove(step: FirstStep, name: Fqdn): Fqdn | undefined {
  const dot = step.base.lastIndexOf('.');
  if (dot < 0 || !name.startsWith(`${step.base}.`)) return undefined;
  return `${step.base.slice(dot + 1)}${name.slice(step.base.length)}` as Fqdn;
}

/** Whether a pod with this client-map entry is walked for at this first step: of its namespace, with the default search path. */
function walksFor(entry: ClientEntry | null | undefined, step: FirstStep): boolean {
  return entry?.namespace === step.namespace && entry.searchDefault;
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
