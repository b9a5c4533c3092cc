import type { Buffer } from 'node:buffer';
import {
  assembleReply,
  clientAddressOf,
  copyRecord,
  copyWithoutOpt,
  deniedZoneOf,
  FLAG,
  type Fqdn,
  HEADER_BYTES,
  isInZone,
  minimalAnyReply,
  QTYPE,
  RCODE,
  RCODE_MASK,
  readName,
  type ScannedRecord,
  type ScannedResponse,
  scanResponse,
  toFqdn,
} from '@cluster-dns/wire';
import type { Resolved } from '../../config/forwarder-request.js';
import { type Route, type RouteTable, serversInTurn } from '../../config/route-table.js';
import { MAX_TTL_SECONDS } from '../cache/cache.js';
import { scrubReply } from './scrub.js';
import { type ForwardOptions, forwardQuery, type UpstreamQuestion } from './upstream.js';

/** How many CNAMEs are followed at most (kube-dns: 8). */
export const MAX_CHASE = 8;

/**
 * The question as a route's servers get it: the client's address only where the route carries it
 * (to the cluster's DNS), never on a fall-through to the upstreams or a chase through another route.
 */
function askedOn(route: Route, q: UpstreamQuestion): UpstreamQuestion {
  if (route.carryClient || q.clientAddress === undefined) return q;
  const { clientAddress: _dropped, ...rest } = q;
  return rest;
}

/**
 * An authoritative NXDOMAIN for a zone narrower than the route's (the record-builder's for a
 * Service CIDR's reverse zone, `96.10.in-addr.arpa.` inside `in-addr.arpa.`): the server owns that
 * zone, so the name does not exist anywhere and asking the upstreams would only leak it.
 */
function deniesOwnZone(raw: Buffer, route: Route): boolean {
  if ((raw.readUInt16BE(2) & RCODE_MASK) !== RCODE.NXDOMAIN) return false;
  const zone = deniedZoneOf(raw, scanResponse(raw));
  return zone !== undefined && zone !== route.domain && isInZone(zone, route.domain);
}

/**
 * Resolves one question through its route (looked up once, by the caller): reverse names the
 * cluster does not know fall through to the upstreams, and a CNAME that leaves the route's domain
 * without an answer (an ExternalName service) is chased through the target's own route, the chain
 * returned as one answer. The reply is walked once, unless scrubbing dropped records from it or a
 * chase joined two.
 */
export async function resolveQuestion(
  routes: RouteTable,
  firstRoute: Route,
  q: UpstreamQuestion,
  options: ForwardOptions,
  depth = 0,
): Promise<Resolved> {
  let route = firstRoute;
  let raw = await forwardQuery(serversInTurn(route), askedOn(route, q), options, route);
  let rcode = raw.readUInt16BE(2) & RCODE_MASK;
  const personal = route.carryClient && q.clientAddress !== undefined && clientAddressOf(raw) !== undefined;
  if (
    route.fallsThrough &&
    (rcode === RCODE.NXDOMAIN || rcode === RCODE.REFUSED) &&
    routes.upstream.servers.length > 0 &&
    !deniesOwnZone(raw, route)
  ) {
    route = routes.upstream;
    raw = await forwardQuery(serversInTurn(route), askedOn(route, q), options, route);
    rcode = raw.readUInt16BE(2) & RCODE_MASK;
  }
  let { wire, scanned } = normalize(raw);
  clampTtls(wire, scanned);
  const scrubbed = scrubReply(wire, scanned, q.name);
  if (scrubbed !== wire) {
    wire = scrubbed;
    scanned = scanResponse(wire);
  }
  // RFC 8482: one RRset for ANY, whatever the upstream gave, so we never amplify more than it.
  if (q.qtype === QTYPE.ANY) {
    const minimal = minimalAnyReply(wire, scanned);
    if (minimal !== wire) {
      wire = minimal;
      scanned = scanResponse(wire);
    }
  }
  const mayChase =
    route.kind !== 'upstream' &&
    rcode === RCODE.NOERROR &&
    q.qtype !== QTYPE.CNAME &&
    q.qtype !== QTYPE.ANY &&
    depth < MAX_CHASE &&
    scanned.records.some((r) => r.section === 'answer' && r.type === QTYPE.CNAME);
  if (mayChase) {
    wire = await chaseCname(routes, q, wire, scanned, options, depth);
    scanned = scanResponse(wire);
  }
  return personal ? { wire, scanned, route, personal } : { wire, scanned, route };
}

/**
 * A copy of the reply with its OPT removed (it is per hop), ID 0, RA set, AA cleared (a
 * forwarder's answers, cached or not, are not authoritative: RFC 1035 §6.1.3), and the question in
 * canonical case (the upstream may echo ours in any case, 0x20 or the asker's).
 */
function normalize(raw: Buffer): { wire: Buffer; scanned: ScannedResponse } {
  const { wire, scanned } = copyWithoutOpt(raw, scanResponse(raw));
  wire.writeUInt16BE(0, 0);
  wire.writeUInt16BE((wire.readUInt16BE(2) | FLAG.RA) & ~FLAG.AA, 2);
  // The question's name octets (checked against ours: uncompressed), ASCII letters lowercased.
  for (let i = HEADER_BYTES; i < scanned.questionEnd - 4; i++) {
    const c = wire[i] as number;
    if (c >= 0x41 && c <= 0x5a) wire[i] = c + 0x20;
  }
  return { wire, scanned };
}

/**
 * Every TTL as a client may take it, in place: one with its top bit set is 0 (RFC 2181 §8), and
 * none is over 7 days (RFC 8767 §4), so the asker of a miss sees what later hits will.
 */
function clampTtls(wire: Buffer, scanned: ScannedResponse): void {
  for (const r of scanned.records) {
    const raw = wire.readUInt32BE(r.ttlOffset);
    if (raw > MAX_TTL_SECONDS) wire.writeUInt32BE(raw > 0x7fffffff ? 0 : MAX_TTL_SECONDS, r.ttlOffset);
  }
}

const ownerOf = (wire: Buffer, r: ScannedRecord) => toFqdn(readName(wire, r.start).name);

/**
 * Follows the CNAME chain of a reply to its last target and, when the reply has no answer of the
 * type asked there, asks for it through the target's own route. The two answers are joined at the
 * wire level: records are copied with their names spelt out, never decoded and encoded again, so
 * records of any type pass through unchanged.
 */
async function chaseCname(
  routes: RouteTable,
  q: UpstreamQuestion,
  wire: Buffer,
  scanned: ScannedResponse,
  options: ForwardOptions,
  depth: number,
): Promise<Buffer> {
  const answers = scanned.records.filter((r) => r.section === 'answer');
  let target: Fqdn = q.name;
  const seen = new Set<string>([target]);
  for (;;) {
    const owner = target;
    const cname = answers.find((r) => r.type === QTYPE.CNAME && ownerOf(wire, r) === owner);
    if (!cname) break;
    target = toFqdn(readName(wire, cname.rdataOffset).name);
    // A loop in the chain: return what the route said.
    if (seen.has(target)) return wire;
    seen.add(target);
  }
  if (target === q.name || answers.some((r) => r.type === q.qtype && ownerOf(wire, r) === target)) return wire;
  const next = await resolveQuestion(routes, routes.routeFor(target), { ...q, name: target }, options, depth + 1);
  const tail = next.scanned.records;
  const tailAnswers = tail.filter((r) => r.section === 'answer');
  const flags = (wire.readUInt16BE(2) & ~(FLAG.AA | FLAG.TC | RCODE_MASK)) | FLAG.RA | next.scanned.rcode;
  return assembleReply({ id: 0, flags }, wire.subarray(HEADER_BYTES, scanned.questionEnd), [
    [...answers.map((r) => copyRecord(wire, r)), ...tailAnswers.map((r) => copyRecord(next.wire, r))],
    tailAnswers.length > 0 ? [] : tail.filter((r) => r.section === 'authority').map((r) => copyRecord(next.wire, r)),
    [],
  ]);
}
