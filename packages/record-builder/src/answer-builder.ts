import { anyAnswerType, type Fqdn, isInZone, labelsOf, parentOf, QTYPE, RCODE, type Rr } from '@cluster-dns/wire';
import { importKey, serviceKey } from './cluster-model.js';
import { hostRecordsByLabel, type RecordList, withSrvWeights } from './service-records.js';
import { recordsAt, soaRecord } from './zone-records.js';
import type { ZoneView } from './zone-view.js';

export type { ZoneView };

export interface AnswerParts {
  rcode: number;
  answers: Rr[];
  authorities: Rr[];
  additionals: Rr[];
  /** The Services this answer was built from: a change to one of them makes it stale. */
  owners: readonly string[];
  /**
   * True when the answer stays valid until one of `owners` changes. Negative answers carry the SOA
   * serial and may be made wrong by a new name: they are dropped on any change.
   */
  stable: boolean;
}

/** The served zone a name falls in, most specific first; undefined means not ours. */
export function zoneOf(view: ZoneView, name: Fqdn): Fqdn | undefined {
  if (isInZone(name, view.zone)) return view.zone;
  if (view.clustersetZone && isInZone(name, view.clustersetZone)) return view.clustersetZone;
  const external = view.external?.find((e) => isInZone(name, e.zone));
  if (external) return external.zone;
  return view.reverseZones.find((z) => isInZone(name, z));
}

/** The answer for a name in one of our zones, per the spec and RFC 1034/2308/8020. */
export function buildAnswer(view: ZoneView, zone: Fqdn, name: Fqdn, qtype: number): AnswerParts {
  const at = recordsAt(view, zone, name, qtype);
  const negative = (rcode: number): AnswerParts => ({
    rcode,
    answers: [],
    // In a Service CIDR, that block's reverse zone speaks: the forwarders keep its denial.
    authorities: [
      soaRecord(view, view.reverseZones.includes(zone) ? (view.state.serviceCidrZoneOf(name, zone) ?? zone) : zone),
    ],
    additionals: [],
    owners: at.owners,
    stable: false,
  });
  const rrs = at.rrs;
  if (!rrs || rrs.length === 0) return negative(at.exists ? RCODE.NOERROR : RCODE.NXDOMAIN);
  const cname = rrs.find((r) => r.type === QTYPE.CNAME);
  let answers: Rr[];
  if (cname && qtype !== QTYPE.CNAME && qtype !== QTYPE.ANY) {
    // The resolver (our forwarder, or the client) follows the alias out of the zone.
    answers = [cname];
  } else {
    // ANY gets one RRset (RFC 8482 §4.1), over TCP too: every RRset at a headless name with its SRV
    // glue is the largest answer we make for the fewest octets asked.
    const type = qtype === QTYPE.ANY ? anyAnswerType(rrs.map((r) => r.type)) : qtype;
    answers = rrs.filter((r) => r.type === type);
  }
  if (answers.length === 0) return negative(RCODE.NOERROR);
  answers = withSrvWeights(answers);
  const owners = new Set(at.owners);
  const additionals = glueFor(view, answers, owners);
  return { rcode: RCODE.NOERROR, answers, authorities: [], additionals, owners: [...owners], stable: at.stable };
}

/**
 * A/AAAA of the SRV and NS targets in our zones, for the additional section (RFC 2782; RFC 1035
 * §3.3.11: the apex NS with its name server's address). Targets under one headless Service are
 * looked up in one pass over its endpoints (a 1,000-endpoint SRV answer is not 1,000 scans).
 */
function glueFor(view: ZoneView, answers: readonly Rr[], owners: Set<string>): Rr[] {
  const additionals: Rr[] = [];
  const glued = new Set<string>();
  const hostsUnder = new Map<string, ReadonlyMap<string, RecordList> | undefined>();
  for (const srv of answers) {
    if ((srv.type !== QTYPE.SRV && srv.type !== QTYPE.NS) || glued.has(srv.target)) continue;
    glued.add(srv.target);
    const target = srv.target as Fqdn;
    // An endpoint's name is one label under its Service's; in the clusterset zone, two
    // (`<host>.<clusterid>`).
    const imported = view.clustersetZone !== undefined && isInZone(target, view.clustersetZone);
    const parent = imported ? parentOf(parentOf(target)) : parentOf(target);
    if (!hostsUnder.has(parent)) hostsUnder.set(parent, headlessHosts(view, parent, owners));
    const hosts = hostsUnder.get(parent);
    let rrs: readonly Rr[] | undefined;
    if (hosts) rrs = hosts.get(imported ? hostLabelOf(target) : firstLabelOf(target))?.rrs;
    else {
      const zone = zoneOf(view, target);
      if (!zone) continue;
      const at = recordsAt(view, zone, target, QTYPE.A);
      for (const o of at.owners) owners.add(o);
      rrs = at.rrs;
    }
    for (const rr of rrs ?? []) if (rr.type === QTYPE.A || rr.type === QTYPE.AAAA) additionals.push(rr);
  }
  return additionals;
}

/** An imported endpoint's label under its ServiceImport: `<host>.<clusterid>`. */
const hostLabelOf = (name: Fqdn): string => labelsOf(name).slice(0, 2).join('.');

/** A target's first label: a slice where it has no escapes, which ours never do. */
const firstLabelOf = (name: Fqdn): string =>
  name.includes('\\') ? (labelsOf(name)[0] as string) : name.slice(0, name.indexOf('.'));

/**
 * When `base` is a headless Service's name in the cluster zone (or a Headless ServiceImport's in
 * the clusterset zone), its endpoint names' records by label.
 */
function headlessHosts(view: ZoneView, base: Fqdn, owners: Set<string>): ReadonlyMap<string, RecordList> | undefined {
  const zone = isInZone(base, view.zone)
    ? view.zone
    : view.clustersetZone && isInZone(base, view.clustersetZone)
      ? view.clustersetZone
      : undefined;
  if (!zone) return undefined;
  const labels = labelsOf(base);
  const below = labels.slice(0, labels.length - labelsOf(zone).length);
  if (below.length !== 3 || below[2] !== 'svc') return undefined;
  const key = (zone === view.zone ? serviceKey : importKey)(below[1] as string, below[0] as string);
  const service = view.state.serviceByKey(key);
  if (service?.kind !== 'headless') return undefined;
  owners.add(key);
  return hostRecordsByLabel(service, view.state.groupsOf(key), view);
}
