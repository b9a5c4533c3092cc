import { isIP } from 'node:net';
import { type Fqdn, isInZone, QCLASS, QTYPE, RCODE, type Rr, toFqdn } from '@cluster-dns/wire';
import type { ClusterState } from './cluster-state.js';
import { type PodsMode, parsePodName } from './pod-records.js';
import { withSrvWeights } from './service-records.js';

export interface ZoneView {
  readonly zone: Fqdn;
  readonly reverseZones: readonly Fqdn[];
  readonly ttlSeconds: number;
  readonly pods: PodsMode;
  /** The Service whose cluster IPs `ns.dns.<zone>` (the NS target) resolves to. */
  readonly dnsService: { namespace: string; name: string } | undefined;
  readonly state: ClusterState;
}

export interface AnswerParts {
  rcode: number;
  answers: Rr[];
  authorities: Rr[];
  additionals: Rr[];
  /**
   * True when the answer depends only on the records of the name asked (and its owner's other
   * names), so it stays valid until those change. Negative answers carry the SOA serial and
   * synthesized ones depend on other state: they are dropped on any change.
   */
  stable: boolean;
}

/** The served zone a name falls in, most specific first; undefined means not ours. */
export function zoneOf(view: ZoneView, name: Fqdn): Fqdn | undefined {
  if (isInZone(name, view.zone)) return view.zone;
  return view.reverseZones.find((z) => isInZone(name, z));
}

export function soaRecord(view: ZoneView, zone: Fqdn): Rr {
  return {
    name: zone,
    type: QTYPE.SOA,
    class: QCLASS.IN,
    ttl: view.ttlSeconds,
    soa: {
      primary: toFqdn(`ns.dns.${view.zone}`),
      admin: toFqdn(`hostmaster.${view.zone}`),
      serial: view.state.serial,
      refresh: 7200,
      retry: 1800,
      expiration: 86400,
      // RFC 2308 §5: the negative TTL is min(SOA TTL, MINIMUM); both are the record TTL.
      minimum: view.ttlSeconds,
    },
  };
}

/** Records made at query time rather than stored: the apex, the NS target, pod names. */
function synthesize(view: ZoneView, zone: Fqdn, name: Fqdn): { rrs: Rr[] | undefined; exists: boolean } {
  const ttl = view.ttlSeconds;
  if (name === zone) {
    const ns: Rr = { name, type: QTYPE.NS, class: QCLASS.IN, ttl, target: toFqdn(`ns.dns.${view.zone}`) };
    return { rrs: [soaRecord(view, zone), ns], exists: true };
  }
  if (zone !== view.zone) return { rrs: undefined, exists: false };
  if (name === toFqdn(`ns.dns.${view.zone}`) || name === toFqdn(`dns.${view.zone}`)) {
    if (name !== toFqdn(`ns.dns.${view.zone}`) || !view.dnsService) return { rrs: undefined, exists: true };
    const svc = view.state.service(view.dnsService.namespace, view.dnsService.name);
    const rrs = (svc?.clusterIPs ?? []).map(
      (ip): Rr => ({ name, type: isIP(ip) === 6 ? QTYPE.AAAA : QTYPE.A, class: QCLASS.IN, ttl, address: ip }),
    );
    return { rrs, exists: true };
  }
  const podZone = toFqdn(`pod.${view.zone}`);
  if (view.pods === 'disabled' || !isInZone(name, podZone)) return { rrs: undefined, exists: false };
  const pod = parsePodName(name, podZone);
  switch (pod.kind) {
    case 'apex':
      return { rrs: undefined, exists: true };
    case 'namespace':
      return { rrs: undefined, exists: view.pods === 'insecure' || view.state.hasPodsIn(pod.namespace) };
    case 'invalid':
      return { rrs: undefined, exists: false };
    case 'address': {
      if (view.pods === 'verified' && !view.state.hasPodIp(pod.namespace, pod.ip))
        return { rrs: undefined, exists: false };
      const type = isIP(pod.ip) === 6 ? QTYPE.AAAA : QTYPE.A;
      return { rrs: [{ name, type, class: QCLASS.IN, ttl, address: pod.ip }], exists: true };
    }
  }
}

/** The answer for a name in one of our zones, per the spec and RFC 1034/2308/8020. */
export function buildAnswer(view: ZoneView, zone: Fqdn, name: Fqdn, qtype: number): AnswerParts {
  const stored = view.state.index.lookup(name);
  const synthesized = stored ? undefined : synthesize(view, zone, name);
  const rrs = stored ?? synthesized?.rrs;
  const negative = (rcode: number): AnswerParts => ({
    rcode,
    answers: [],
    authorities: [soaRecord(view, zone)],
    additionals: [],
    stable: false,
  });
  if (!rrs || rrs.length === 0) {
    const exists = view.state.index.exists(name) || synthesized?.exists === true;
    return negative(exists ? RCODE.NOERROR : RCODE.NXDOMAIN);
  }
  const cname = rrs.find((r) => r.type === QTYPE.CNAME);
  let answers: Rr[];
  if (cname && qtype !== QTYPE.CNAME && qtype !== QTYPE.ANY) {
    // The resolver (our forwarder, or the client) follows the alias out of the zone.
    answers = [cname];
  } else {
    answers = qtype === QTYPE.ANY ? rrs : rrs.filter((r) => r.type === qtype);
  }
  if (answers.length === 0) return negative(RCODE.NOERROR);
  answers = withSrvWeights(answers);
  const additionals: Rr[] = [];
  for (const srv of answers) {
    if (srv.type !== QTYPE.SRV || !srv.target) continue;
    for (const rr of view.state.index.lookup(srv.target as Fqdn) ?? []) {
      if ((rr.type === QTYPE.A || rr.type === QTYPE.AAAA) && !additionals.includes(rr)) additionals.push(rr);
    }
  }
  return { rcode: RCODE.NOERROR, answers, authorities: [], additionals, stable: stored !== undefined && name !== zone };
}
