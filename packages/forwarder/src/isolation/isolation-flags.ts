import { type ClientLimits, type FlagValues, flag } from '@cluster-dns/runtime';
import type { Cidr } from '@cluster-dns/wire';
import type { SubdomainGuardOptions } from '../plugins/subdomain-guard/subdomain-guard-stage.js';

/**
 * The isolation rows, the same in the forwarder's flag table and node-cache's: what one client
 * may take from the others. The defaults are far above what a well-behaved pod asks (a busy one
 * asks hundreds a second) and on, in both places a client is seen: in a node cache the source is
 * a pod; in the Pod's forwarder behind node caches it is a node, and the limits are fairness
 * between nodes (their misses come over TCP, which has the larger rate), unless the node caches
 * name the pod (--trust-client-address-from): then it is the pod again.
 */
export const isolationFlags = () => ({
  'client-qps': flag.int(
    'UDP queries a second each client address may send; past it (and its burst), REFUSED, every --client-slip-th one TC instead, and dropped once it has been over for a second; 0 = no limit',
    2000,
    { min: 0, max: 10_000_000 },
  ),
  'client-burst': flag.int('UDP queries a client may send at once, saved up while it asks less than its rate', 500, {
    min: 1,
    max: 10_000_000,
  }),
  'client-tcp-qps': flag.int(
    'TCP queries a second each client address may send (node caches send their misses over TCP); 0 = no limit',
    20_000,
    { min: 0, max: 10_000_000 },
  ),
  'client-tcp-burst': flag.int(
    'TCP queries a client may send at once, saved up while it asks less than its rate',
    20_000,
    {
      min: 1,
      max: 10_000_000,
    },
  ),
  'client-slip': flag.int(
    'past its rate, every Nth UDP query of a client gets TC (so a real client asks again over TCP) instead of REFUSED; 0 = REFUSED only',
    2,
    { min: 0, max: 1000 },
  ),
  'rrl-responses-per-second': flag.int(
    'identical answers of --rrl-min-bytes or more a second to one address (response rate limiting, against reflection); 0 = no limit',
    100,
    { min: 0, max: 10_000_000 },
  ),
  'rrl-min-bytes': flag.int('answers this large or larger are rate limited per address and question', 512, {
    min: 0,
    max: 65535,
  }),
  'rrl-slip': flag.int(
    'past the response rate, every Nth such answer is sent as TC, the others dropped; 0 = dropped only',
    2,
    { min: 0, max: 1000 },
  ),
  'shed-after': flag.duration(
    'drop UDP queries unread once the queue waiting in the kernel would take this long to drain, until it empties; 0 = never',
    1000,
  ),
  'jostle-timeout': flag.duration(
    'when a route’s share of in-flight questions is full, a new one pushes out the one that has waited this long or longer (its asker gets SERVFAIL), as Unbound’s jostle-timeout',
    200,
  ),
  'subdomain-guard-misses': flag.int(
    'distinct names missed under one domain within --subdomain-guard-window that, while its upstream fails, trip the random-subdomain guard; 0 = off',
    100,
    { min: 0, max: 10_000_000 },
  ),
  'subdomain-guard-window': flag.duration('the window the random-subdomain guard counts misses in', 10_000),
  'subdomain-guard-hold': flag.duration(
    'how long a tripped domain’s new names get SERVFAIL without being asked upstream',
    30_000,
  ),
});

type IsolationValues = FlagValues<ReturnType<typeof isolationFlags>>;

/** The isolation rows' values, as the forwarder takes them. */
export interface IsolationOptions {
  readonly limits: ClientLimits;
  /** Who may name the client it asks for (--trust-client-address-from). */
  readonly trustClientAddressFrom: readonly Cidr[];
  /** Drop UDP queries unread once the socket has been behind this long (wire's UdpBacklog); 0 = never. */
  readonly shedAfterMs: number;
  /** A question that has waited this long may be pushed out of a full route share by a newer one. */
  readonly jostleMs: number;
  readonly guard: SubdomainGuardOptions;
}

/**
 * The isolation rows' values as the forwarder takes them; `trust-client-address-from` is the Pod
 * forwarder's alone (a node cache names pods, it trusts nobody's names).
 */
export function toIsolationOptions(
  values: IsolationValues & { 'trust-client-address-from'?: readonly Cidr[] },
): IsolationOptions {
  return Object.freeze({
    limits: Object.freeze({
      qps: values['client-qps'],
      burst: values['client-burst'],
      tcpQps: values['client-tcp-qps'],
      tcpBurst: values['client-tcp-burst'],
      slip: values['client-slip'],
      rrlResponsesPerSecond: values['rrl-responses-per-second'],
      rrlMinBytes: values['rrl-min-bytes'],
      rrlSlip: values['rrl-slip'],
    }),
    trustClientAddressFrom: Object.freeze([...(values['trust-client-address-from'] ?? [])]),
    shedAfterMs: values['shed-after'],
    jostleMs: values['jostle-timeout'],
    guard: Object.freeze({
      minMisses: values['subdomain-guard-misses'],
      windowMs: values['subdomain-guard-window'],
      holdMs: values['subdomain-guard-hold'],
    }),
  });
}
