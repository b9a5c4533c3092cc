import {
  decodeMessage,
  encodeMessage,
  type Fqdn,
  HEADER_BYTES,
  QTYPE,
  RCODE,
  type Rr,
  type ScannedResponse,
  scanResponse,
  stripOpt,
  toFqdn,
  writeName,
} from '@cluster-dns/wire';
import type { Route, RouteTable } from './route-table.js';
import { type ForwardOptions, forwardQuery, type UpstreamQuestion } from './upstream.js';

/** How many CNAMEs are followed at most (kube-dns: 8). */
export const MAX_CHASE = 8;

export interface Resolved {
  /** The reply to cache and serve: ID 0, the canonical question, no OPT, RA set. */
  readonly wire: Buffer;
  readonly scanned: ScannedResponse;
  /** The route that decided the answer; the cache keeps it only while that route stands. */
  readonly route: Route;
}

/**
 * Resolves one question through its route: reverse names the cluster does not know fall through
 * to the upstreams, and a CNAME that leaves the route's domain without an answer (an ExternalName
 * service) is chased through the target's own route, the chain returned as one answer.
 */
export async function resolveQuestion(
  routes: RouteTable,
  q: UpstreamQuestion,
  options: ForwardOptions,
  depth = 0,
): Promise<Resolved> {
  let route = routes.routeFor(q.name);
  let raw = await forwardQuery(route.servers, q, options);
  let rcode = raw.readUInt16BE(2) & 0xf;
  if (
    route.fallsThrough &&
    (rcode === RCODE.NXDOMAIN || rcode === RCODE.REFUSED) &&
    routes.upstream.servers.length > 0
  ) {
    route = routes.upstream;
    raw = await forwardQuery(route.servers, q, options);
    rcode = raw.readUInt16BE(2) & 0xf;
  }
  let wire = normalize(raw, q.name);
  let scanned = scanResponse(wire);
  // Only a reply whose answer holds a CNAME and nothing of the type asked needs the (slow) decode.
  const mayChase =
    route.kind !== 'upstream' &&
    rcode === RCODE.NOERROR &&
    q.qtype !== QTYPE.CNAME &&
    q.qtype !== QTYPE.ANY &&
    depth < MAX_CHASE &&
    scanned.records.some((r) => r.section === 'answer' && r.type === QTYPE.CNAME);
  if (mayChase) {
    wire = await chaseCname(routes, q, wire, options, depth);
    scanned = scanResponse(wire);
  }
  return { wire, scanned, route };
}

/** OPT removed, ID 0, RA set, and our canonical question (the upstream may have changed its case). */
function normalize(raw: Buffer, name: Fqdn): Buffer {
  const wire = Buffer.from(stripOpt(raw, scanResponse(raw)));
  wire.writeUInt16BE(0, 0);
  wire.writeUInt16BE(wire.readUInt16BE(2) | 0x0080, 2);
  const canonical = writeName(name);
  if (wire.readUInt16BE(4) === 1 && wire.length >= HEADER_BYTES + canonical.length) {
    const asked = wire.subarray(HEADER_BYTES, HEADER_BYTES + canonical.length);
    if (asked.toString('latin1').toLowerCase() === canonical.toString('latin1')) canonical.copy(wire, HEADER_BYTES);
  }
  return wire;
}

async function chaseCname(
  routes: RouteTable,
  q: UpstreamQuestion,
  wire: Buffer,
  options: ForwardOptions,
  depth: number,
): Promise<Buffer> {
  const message = decodeMessage(wire);
  let target = q.name as string;
  const seen = new Set<string>([target]);
  for (;;) {
    const owner = target;
    const cname = message.answers.find((r) => r.type === QTYPE.CNAME && toFqdn(r.name) === owner);
    if (!cname?.target) break;
    target = toFqdn(cname.target);
    if (seen.has(target)) return wire;
    seen.add(target);
  }
  if (target === q.name) return wire;
  const answered = message.answers.some((r) => r.type === q.qtype && toFqdn(r.name) === target);
  if (answered) return wire;
  const next = await resolveQuestion(routes, { ...q, name: target as Fqdn }, options, depth + 1);
  const tail = decodeMessage(next.wire);
  const answers: Rr[] = [...message.answers, ...tail.answers];
  return encodeMessage({
    ...message,
    flags: { ...message.flags, aa: false, ra: true, rcode: tail.flags.rcode },
    answers,
    authorities: tail.answers.length ? [] : tail.authorities,
    additionals: [],
  });
}
