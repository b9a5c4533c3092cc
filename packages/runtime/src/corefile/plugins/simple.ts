import { isIP } from 'node:net';
import type { HostPort } from '../../host-port.js';
import type { DirectiveArgs } from '../args.js';

/** `health [ADDRESS] { lameduck DURATION }`: /health, on :8080 unless given. */
export function setupHealth(a: DirectiveArgs): { address: HostPort; lameduckMs: number | undefined } {
  const [at] = a.count(0, 1, 'health [ADDRESS]');
  let lameduckMs: number | undefined;
  for (const d of a.directive.block ?? []) {
    const s = a.sub(d);
    if (d.name !== 'lameduck') s.fail('only "lameduck DURATION" is supported');
    lameduckMs = s.durationMs(s.count(1, 1, 'lameduck DURATION')[0], 'DURATION');
  }
  return { address: a.address(at ?? ':8080', '0.0.0.0', 8080), lameduckMs };
}

/** `ready [ADDRESS]`: /ready, on :8181 unless given. */
export function setupReady(a: DirectiveArgs): HostPort {
  a.noBlock();
  const [at] = a.count(0, 1, 'ready [ADDRESS]');
  return a.address(at ?? ':8181', '0.0.0.0', 8181);
}

/** `prometheus [ADDRESS]`: /metrics, on localhost:9153 unless given. */
export function setupPrometheus(a: DirectiveArgs): HostPort {
  a.noBlock();
  const [at] = a.count(0, 1, 'prometheus [ADDRESS]');
  return a.address(at ?? 'localhost:9153', '0.0.0.0', 9153);
}

/** `reload [INTERVAL] [JITTER]`: how often the Corefile is read again (30 s by default, 2 s at least). */
export function setupReload(a: DirectiveArgs): number {
  a.noBlock();
  const [interval, jitter] = a.count(0, 2, 'reload [INTERVAL] [JITTER]');
  const ms = interval === undefined ? 30_000 : a.durationMs(interval, 'INTERVAL');
  if (ms < 2000) a.fail('INTERVAL must be 2s or more');
  // The jitter spreads CoreDNS replicas' reloads; ours read a mounted file whose update the kubelet
  // already spreads, so it is checked and not needed.
  if (jitter !== undefined) a.durationMs(jitter, 'JITTER');
  return ms;
}

/** `bind ADDRESS...`: the addresses to listen on (interface names are not supported). */
export function setupBind(a: DirectiveArgs): string[] {
  a.noBlock();
  const addresses = a.count(1, 64, 'bind ADDRESS...');
  for (const address of addresses)
    if (isIP(address) === 0)
      a.fail(`${JSON.stringify(address)} is not an IP address (interface names are not supported)`);
  return [...new Set(addresses)];
}

/** `loadbalance [round_robin]`: A, AAAA and MX records of an answer in a turning order. */
export function setupLoadbalance(a: DirectiveArgs): void {
  a.noBlock();
  const [policy] = a.count(0, 1, 'loadbalance [round_robin]');
  if (policy !== undefined && policy !== 'round_robin')
    a.fail(`only round_robin is supported, got ${JSON.stringify(policy)}`);
}

/**
 * `autopath [ZONE...] RESOLV-CONF` (CoreDNS's autopath): here RESOLV-CONF must be `@kubernetes`,
 * the search path of the asking pod's namespace, which the record-builder's client map gives
 * (it needs the block's `kubernetes` with `pods verified`, as CoreDNS's does). The node's search
 * domains after the cluster's come from /etc/resolv.conf, as CoreDNS's @kubernetes reads its own.
 */
export function setupAutopath(a: DirectiveArgs): { zones: string[] } {
  a.noBlock();
  const args = a.count(1, 16, 'autopath [ZONE...] @kubernetes');
  const source = args.at(-1) as string;
  if (source !== '@kubernetes')
    a.fail(
      `only "@kubernetes" is supported as its search path (a pod's, from the client map), got ${JSON.stringify(source)}`,
    );
  return { zones: args.slice(0, -1) };
}

/** A plugin that takes no arguments here: `errors`, `log`, `loop`. */
export function setupFlag(a: DirectiveArgs): true {
  a.noBlock();
  a.count(0, 0, a.directive.name);
  return true;
}
