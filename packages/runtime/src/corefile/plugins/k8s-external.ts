import type { Fqdn } from '@cluster-dns/wire';
import type { DirectiveArgs } from '../args.js';

/**
 * `k8s_external [ZONE...] { apex APEX; ttl TTL; headless; fallthrough [ZONES] }`: Services'
 * external addresses (LoadBalancer ingress, externalIPs) under ZONE, as `svc.ns.ZONE`.
 */
export interface K8sExternalConfig {
  /** undefined: the block's zones. */
  readonly zones: readonly Fqdn[] | undefined;
  /** The label under which the zone's own NS and SOA names are made (`dns` by default). */
  readonly apex: string;
  readonly ttlSeconds: number;
  /** Headless Services' endpoints too (`endpoint.svc.ns.ZONE`). */
  readonly headless: boolean;
  readonly fallthrough: readonly Fqdn[] | undefined;
  readonly line: number;
}

export function setupK8sExternal(a: DirectiveArgs): K8sExternalConfig {
  let apex = 'dns';
  let ttlSeconds = 5;
  let headless = false;
  let fallthrough: Fqdn[] | undefined;
  for (const d of a.directive.block ?? []) {
    const s: DirectiveArgs = a.sub(d);
    switch (d.name) {
      case 'ttl': {
        if (d.args.length === 0) s.fail('ttl needs a value');
        const raw = d.args[0] as string;
        if (!/^-?\d+$/.test(raw)) s.fail(`strconv.Atoi: parsing ${JSON.stringify(raw)}: invalid syntax`);
        const t = Number(raw);
        if (t < 0 || t > 3600) s.fail(`ttl must be in range [0, 3600]: ${t}`);
        ttlSeconds = t;
        break;
      }
      case 'apex':
        if (d.args.length === 0) s.fail('apex needs a label');
        apex = d.args[0] as string;
        break;
      case 'headless':
        headless = true;
        break;
      case 'fallthrough':
        fallthrough = s.zones(d.args);
        break;
      default:
        s.fail(`unknown property '${d.name}'`);
    }
  }
  return {
    zones: a.directive.args.length ? a.zones(a.directive.args) : undefined,
    apex,
    ttlSeconds,
    headless,
    fallthrough,
    line: a.directive.line,
  };
}
