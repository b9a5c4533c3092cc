import type { Fqdn } from '@cluster-dns/wire';
import type { HostPort } from '../../host-port.js';
import type { DirectiveArgs } from '../args.js';

/** `forward` (coredns/coredns plugin/forward), the options we take. */
export interface ForwardConfig {
  readonly from: Fqdn;
  /** Servers, or a resolv.conf whose nameservers are the servers. */
  readonly to: readonly HostPort[] | { readonly resolvFile: string };
  /** `except NAMES`: names under these are not forwarded. */
  readonly except: readonly Fqdn[];
  readonly forceTcp: boolean;
  readonly maxConcurrent: number | undefined;
  /** Which server first: random (CoreDNS's default), round_robin, or sequential (in order). */
  readonly policy: 'random' | 'round_robin' | 'sequential';
  readonly line: number;
}

export function setupForward(a: DirectiveArgs): ForwardConfig {
  const [from, ...to] = a.directive.args;
  if (from === undefined || to.length === 0) a.fail('expected FROM TO...');
  if (to.length > 15) a.fail('at most 15 destinations');
  let forceTcp = false;
  let maxConcurrent: number | undefined;
  let policy: ForwardConfig['policy'] = 'random';
  const except: Fqdn[] = [];
  for (const d of a.directive.block ?? []) {
    const s = a.sub(d);
    if (d.name === 'force_tcp') forceTcp = true;
    else if (d.name === 'prefer_udp') forceTcp = false;
    else if (d.name === 'max_concurrent') maxConcurrent = s.integer(s.count(1, 1, 'max_concurrent MAX')[0], 'MAX', 1);
    else if (d.name === 'except') except.push(...s.zones(s.count(1, 64, 'except NAMES...')));
    else if (d.name === 'policy') {
      policy = s.oneOf(
        s.count(1, 1, 'policy random|round_robin|sequential')[0],
        ['random', 'round_robin', 'sequential'] as const,
        'the policy',
      );
    } else
      s.fail(
        `"${d.name}" is not supported (force_tcp, prefer_udp, max_concurrent, except and policy are; our health checks and timeouts are the forwarder's flags)`,
      );
  }
  const files = to.filter((t) => t.startsWith('/'));
  let servers: ForwardConfig['to'];
  if (files.length > 0) {
    if (to.length > 1) a.fail('a resolv.conf path must be the only destination');
    servers = { resolvFile: files[0] as string };
  } else servers = to.map((t) => a.address(t, '', 53));
  return {
    from: a.zones([from])[0] as Fqdn,
    to: servers,
    except,
    forceTcp,
    maxConcurrent,
    policy,
    line: a.directive.line,
  };
}
