import { isIP } from 'node:net';
import { type Fqdn, isValidName, RCODE, toFqdn } from '@cluster-dns/wire';
import type { HostPort } from '../../host-port.js';
import { DirectiveArgs } from '../args.js';
import { RCODE_BY_NAME } from '../rcode-names.js';

/** DNS over TLS to the upstreams (`forward . tls://…`): whom to expect and what to trust. */
export interface ForwardTls {
  /** `tls_servername`, or a server's own `tls://ADDRESS%NAME`: the name its certificate must hold. */
  readonly serverName: string | undefined;
  /** `tls [CERT KEY [CA]]` or `tls CA`: files, as written (relative ones from the Corefile's `root`). */
  readonly cert: string | undefined;
  readonly key: string | undefined;
  readonly ca: string | undefined;
}

/** `health_check DURATION [no_rec] [domain FQDN]`: how a server marked down is probed back up. */
export interface ForwardHealthCheck {
  readonly intervalMs: number;
  readonly recursionDesired: boolean;
  readonly domain: Fqdn;
}

/** `forward` (coredns/coredns plugin/forward), the options we take. */
export interface ForwardConfig {
  readonly from: Fqdn;
  /** Servers, or a resolv.conf whose nameservers are the servers. */
  readonly to: readonly HostPort[] | { readonly resolvFile: string };
  /** Set when the servers are `tls://`: DNS over TLS on kept connections (853 by default). */
  readonly tls: ForwardTls | undefined;
  /** `except NAMES`: names under these are not forwarded by this forward (they go on). */
  readonly except: readonly Fqdn[];
  readonly forceTcp: boolean;
  /** `prefer_udp`: taken; here every query is asked over UDP first anyway (TCP on truncation). */
  readonly preferUdp: boolean;
  readonly maxConcurrent: number | undefined;
  /** Which server first: random (CoreDNS's default), round_robin, or sequential (in order). */
  readonly policy: 'random' | 'round_robin' | 'sequential';
  /** `max_fails`: failures in a row that mark a server down (2; 0: never). */
  readonly maxFails: number;
  readonly healthCheck: ForwardHealthCheck;
  /** `expire`: how long a kept TCP or TLS connection may idle (10 s). */
  readonly expireMs: number;
  /** `failover RCODE...`: answers with these rcodes are asked of the next server too. */
  readonly failover: readonly number[];
  /** `next RCODE...`: answers with these rcodes go on to the next plugin. */
  readonly next: readonly number[];
  /** `failfast_all_unhealthy_upstreams`: SERVFAIL at once when every server is down. */
  readonly failfastAllUnhealthy: boolean;
  /** `read_timeout`: how long one server is waited for (2 s in CoreDNS); undefined: the forwarder's. */
  readonly readTimeoutMs: number | undefined;
  readonly line: number;
}

/** The rcodes `failover` takes: the table's names up to NOTZONE (10). */
const RCODES: Readonly<Record<string, number>> = Object.fromEntries(
  Object.entries(RCODE_BY_NAME).filter(([, code]) => code <= 10),
);

const rcodesOf = (s: DirectiveArgs, what: string): number[] => {
  if (s.directive.args.length === 0) s.fail(`${what} needs at least one rcode`);
  return s.directive.args.map((raw) => {
    const rc = RCODES[raw.toUpperCase()];
    if (rc === undefined) s.fail(`${raw} is not a valid rcode`);
    return rc;
  });
};

/** A non-negative Go duration, named in the error as CoreDNS names it. */
const durationOf = (s: DirectiveArgs, raw: string | undefined, what: string) => {
  if (raw?.startsWith('-')) s.fail(`${what} can't be negative: ${raw}`);
  return s.durationMs(raw, what);
};

/** One destination: `1.2.3.4`, `1.2.3.4:53`, `dns://…`, `tls://1.2.3.4[:853][%name]`, `[v6]:53`. */
function destinationOf(a: DirectiveArgs, raw: string): { server: HostPort; tls: boolean; serverName?: string } {
  const m = /^([a-z0-9]+):\/\/(.*)$/i.exec(raw);
  const scheme = m ? (m[1] as string).toLowerCase() : 'dns';
  const rest = m ? (m[2] as string) : raw;
  if (scheme === 'https' || scheme === 'quic' || scheme === 'grpc')
    a.fail(`'${scheme}' is not supported as a destination protocol here: ${raw} (dns:// and tls:// are)`);
  if (scheme !== 'dns' && scheme !== 'tls')
    a.fail(`'${scheme}' is not supported as a destination protocol in forward: ${raw}`);
  const tls = scheme === 'tls';
  // `%name`: the server's TLS name (CoreDNS's splitZone), kept apart from the address.
  let address = rest;
  let serverName: string | undefined;
  const percent = rest.lastIndexOf('%');
  if (tls && percent > 0) {
    const tail = rest.slice(percent + 1);
    const port = /:(\d+)$/.exec(tail)?.[0] ?? '';
    serverName = tail.slice(0, tail.length - port.length).replace(/\]$/, '');
    address = `${rest.slice(0, percent)}${rest.startsWith('[') ? ']' : ''}${port}`;
  }
  const host = address.startsWith('[')
    ? address.slice(1).replace(/\](:\d+)?$/, '')
    : isIP(address) === 6
      ? address
      : address.replace(/:\d+$/, '');
  if (isIP(host) === 0 && /\.conf$|\//.test(raw))
    a.fail(
      `${JSON.stringify(raw)}: a resolv.conf destination is an absolute path (/etc/resolv.conf), the only destination of its forward`,
    );
  if (isIP(host) === 0)
    a.fail(
      `${JSON.stringify(raw)}: upstreams are IP addresses here (a host name would need a resolver of its own; give its address, and tls_servername for TLS)`,
    );
  return { server: a.address(address, '', tls ? 853 : 53), tls, ...(serverName ? { serverName } : {}) };
}

export function setupForward(a: DirectiveArgs): ForwardConfig {
  const [from, ...to] = a.directive.args;
  if (from === undefined || to.length === 0) a.fail('expected FROM TO...');
  if (to.length > 15) a.fail(`more than 15 TOs configured: ${to.length}`);
  let forceTcp = false;
  let preferUdp = false;
  let maxConcurrent: number | undefined;
  let policy: ForwardConfig['policy'] = 'random';
  let maxFails = 2;
  let healthCheck: ForwardHealthCheck = { intervalMs: 500, recursionDesired: true, domain: toFqdn('.') };
  let expireMs = 10_000;
  let maxAge: { ms: number; raw: string } | undefined;
  let failover: number[] = [];
  let next: number[] = [];
  let failfastAllUnhealthy = false;
  let readTimeoutMs: number | undefined;
  let tlsFiles: Pick<ForwardTls, 'cert' | 'key' | 'ca'> = { cert: undefined, key: undefined, ca: undefined };
  let tlsServerName: string | undefined;
  const except: Fqdn[] = [];
  for (const d of a.directive.block ?? []) {
    const s: DirectiveArgs = a.sub(d);
    switch (d.name) {
      case 'force_tcp':
        s.count(0, 0, 'force_tcp');
        forceTcp = true;
        break;
      case 'prefer_udp':
        s.count(0, 0, 'prefer_udp');
        preferUdp = true;
        break;
      case 'max_concurrent':
        maxConcurrent = s.integer(s.count(1, 1, 'max_concurrent MAX')[0], 'MAX', 0);
        break;
      case 'except':
        except.push(...s.zones(s.count(1, 1000, 'except NAMES...')));
        break;
      case 'policy':
        policy = s.oneOf(
          s.count(1, 1, 'policy random|round_robin|sequential')[0],
          ['random', 'round_robin', 'sequential'] as const,
          'the policy',
        );
        break;
      case 'max_fails':
        maxFails = s.integer(s.count(1, 1, 'max_fails NUMBER')[0], 'NUMBER', 0, 4_294_967_295);
        break;
      case 'max_connect_attempts':
        s.integer(s.count(1, 1, 'max_connect_attempts NUMBER')[0], 'NUMBER', 0, 4_294_967_295);
        s.warn('read and ignored: each server of the route is tried once per query, within the forward deadline');
        break;
      case 'health_check': {
        const [interval, ...options] = d.args;
        if (interval === undefined) s.fail('health_check needs a DURATION');
        let recursionDesired = true;
        let domain = toFqdn('.');
        for (let i = 0; i < options.length; i++) {
          if (options[i] === 'no_rec') recursionDesired = false;
          else if (options[i] === 'domain') {
            const name = options[++i];
            if (name === undefined) s.fail('health_check: domain needs a name');
            if (!isValidName(name)) s.fail(`health_check: invalid domain name ${name}`);
            domain = toFqdn(name);
          } else s.fail(`health_check: unknown option ${options[i]}`);
        }
        healthCheck = { intervalMs: durationOf(s, interval, 'health_check'), recursionDesired, domain };
        break;
      }
      case 'tls': {
        const files = s.count(0, 3, 'tls [CERT KEY [CA]] | tls CA');
        tlsFiles =
          files.length === 1
            ? { cert: undefined, key: undefined, ca: files[0] }
            : { cert: files[0], key: files[1], ca: files[2] };
        if (files.length === 2 || files.length === 3) tlsFiles = { cert: files[0], key: files[1], ca: files[2] };
        break;
      }
      case 'tls_servername':
        tlsServerName = s.count(1, 1, 'tls_servername NAME')[0];
        break;
      case 'expire':
        expireMs = durationOf(s, s.count(1, 1, 'expire DURATION')[0], 'expire');
        break;
      case 'max_age':
        maxAge = { ms: durationOf(s, s.count(1, 1, 'max_age DURATION')[0], 'max_age'), raw: d.args[0] as string };
        s.warn('read and ignored: a kept connection closes after `expire` idle, whatever its age');
        break;
      case 'max_idle_conns':
        s.integer(s.count(1, 1, 'max_idle_conns NUMBER')[0], 'NUMBER', 0);
        s.warn('read and ignored: kept connections are pooled per server by how many queries are in flight');
        break;
      case 'read_timeout': {
        readTimeoutMs = s.durationMs(s.count(1, 1, 'read_timeout DURATION')[0], 'read_timeout');
        if (readTimeoutMs <= 0) s.fail('read_timeout must be positive');
        break;
      }
      case 'failover':
        failover = rcodesOf(s, 'failover');
        if (failover.includes(RCODE.NOERROR)) s.fail('NOERROR cannot be a failover rcode');
        break;
      case 'next':
        next = rcodesOf(s, 'next');
        s.warn('read and ignored: a forward’s answer is the answer (the next plugin is not asked)');
        break;
      case 'failfast_all_unhealthy_upstreams':
        s.count(0, 0, 'failfast_all_unhealthy_upstreams');
        failfastAllUnhealthy = true;
        break;
      default:
        s.fail(
          `"${d.name}" is not supported (except, force_tcp, prefer_udp, max_fails, health_check, tls, tls_servername, expire, max_age, max_idle_conns, read_timeout, policy, max_concurrent, failover, next, failfast_all_unhealthy_upstreams are)`,
        );
    }
  }
  if (maxAge && maxAge.ms > 0 && maxAge.ms < expireMs) a.fail(`max_age (${maxAge.raw}) must not be less than expire`);
  const files = to.filter((t) => t.startsWith('/'));
  let servers: ForwardConfig['to'];
  let tls: ForwardTls | undefined;
  if (files.length > 0) {
    if (to.length > 1) a.fail('a resolv.conf path must be the only destination');
    servers = { resolvFile: files[0] as string };
  } else {
    const destinations = to.map((t) => destinationOf(a, t));
    const tlsCount = destinations.filter((d) => d.tls).length;
    if (tlsCount > 0 && tlsCount < destinations.length)
      a.fail('mixing tls:// and plain upstreams in one forward is not supported: give each its own forward');
    const names = [...new Set(destinations.map((d) => d.serverName).filter((n) => n !== undefined))];
    if (tlsServerName && names.length)
      a.fail(`both forward ('${tlsServerName}') and proxy level ('${names[0]}') TLS servernames are set`);
    if (names.length > 1) a.fail('one TLS server name per forward is supported: give each name its own forward');
    servers = destinations.map((d) => d.server);
    if (tlsCount > 0) tls = { serverName: tlsServerName ?? names[0], ...tlsFiles };
  }
  return {
    from: a.zones([from])[0] as Fqdn,
    to: servers,
    tls,
    except,
    forceTcp,
    preferUdp,
    maxConcurrent,
    policy,
    maxFails,
    healthCheck,
    expireMs,
    failover,
    next,
    failfastAllUnhealthy,
    readTimeoutMs,
    line: a.directive.line,
  };
}

/**
 * `proxy FROM TO... { … }`, the forward of CoreDNS before 1.4 (kubeadm 1.11's Corefile): read as
 * a forward with the options that carry over; the caller warns that it is deprecated.
 */
export function setupProxy(a: DirectiveArgs): ForwardConfig {
  const kept: typeof a.directive.block = (a.directive.block ?? []).flatMap((d) => {
    if (d.name === 'policy')
      return [{ ...d, args: d.args.map((p) => (p === 'least_conn' || p === 'first' ? 'sequential' : p)) }];
    if (d.name === 'except' || d.name === 'max_fails') return [d];
    // health_check (an HTTP check there), fail_timeout, protocol, spray …: proxy's own, with no
    // forward counterpart here.
    return [];
  });
  return setupForward(
    new DirectiveArgs({ ...a.directive, block: kept.length ? kept : undefined }, a.source, 'proxy', a.onWarning),
  );
}
