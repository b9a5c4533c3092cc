import type { ErrorCode } from './error-codes.js';

/**
 * Base of every error this project throws on purpose: a stable `code` from ERROR_CODES, a `cause`,
 * and an optional `hint` on how to fix it. It lives in wire, the bottom of the package graph, so
 * wire's own errors are ones too (runMain prints their hint).
 */
export class ClusterDnsError extends Error {
  readonly code: ErrorCode;
  readonly hint: string | undefined;

  constructor(code: ErrorCode, message: string, options: { cause?: unknown; hint?: string } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.hint = options.hint;
  }
}

/** A message that cannot be answered as asked. `headerReadable` decides FORMERR versus drop. */
export class QueryFormatError extends ClusterDnsError {
  constructor(
    message: string,
    readonly headerReadable: boolean,
  ) {
    super('QUERY_MALFORMED', message);
  }
}

/** A name that does not fit the wire: a label over 63 octets, a name over 255, a bad escape. */
export class NameError extends ClusterDnsError {
  constructor(
    readonly text: string,
    reason: string,
  ) {
    super('NAME_INVALID', `cannot write ${JSON.stringify(text)} as a DNS name: ${reason}`);
  }
}

export class AddressError extends ClusterDnsError {
  constructor(readonly text: string) {
    super('ADDRESS_INVALID', `not an IP address: ${JSON.stringify(text)}`);
  }
}

/** No valid reply from a server within the time allowed. */
export class DnsTimeoutError extends ClusterDnsError {
  constructor(
    readonly server: string,
    readonly timeoutMs: number,
  ) {
    super('DNS_TIMEOUT', `no reply from ${server} within ${timeoutMs} ms`);
  }
}

export class ConnectionClosedError extends ClusterDnsError {
  constructor(readonly server: string) {
    super('DNS_CONNECTION_CLOSED', `connection to ${server} closed before a reply`);
  }
}

export class PoolClosedError extends ClusterDnsError {
  constructor() {
    super('UDP_POOL_CLOSED', 'the upstream socket pool is closed');
  }
}

/** The system's reason a bind failed (EADDRINUSE, EACCES …), or its message. */
export function bindReason(cause: unknown): string {
  return (cause as { code?: string }).code ?? (cause as Error).message;
}

/** `address`, and the flags that set it when the caller names them: "0.0.0.0:53/udp (--port)". */
export function bindTarget(address: string, flags: string | undefined): string {
  return flags ? `${address} (${flags})` : address;
}

/** A listener that could not bind, naming the address, the flags that set it and the system's reason. */
export class DnsBindError extends ClusterDnsError {
  constructor(
    readonly address: string,
    cause: unknown,
    flags?: string,
  ) {
    const why = bindReason(cause);
    super('DNS_BIND', `cannot listen on ${bindTarget(address, flags)}: ${why}`, { cause, hint: bindHint(why) });
  }
}

/** What to do about a bind failure, by its reason. */
export function bindHint(reason: string): string | undefined {
  if (reason === 'EADDRINUSE') return 'another process holds this port: stop it or choose another port';
  if (reason === 'EACCES') return 'ports below 1024 need CAP_NET_BIND_SERVICE or net.ipv4.ip_unprivileged_port_start';
  if (reason === 'EADDRNOTAVAIL') return 'this address is not on any interface of this host';
  return undefined;
}
