/** A query that cannot be answered as asked. `headerReadable` decides FORMERR versus drop. */
export class QueryFormatError extends Error {
  readonly code = 'QUERY_MALFORMED';
  constructor(
    message: string,
    readonly headerReadable: boolean,
  ) {
    super(message);
    this.name = 'QueryFormatError';
  }
}

/** No valid reply from a server within the time allowed. */
export class DnsTimeoutError extends Error {
  readonly code = 'DNS_TIMEOUT';
  constructor(
    readonly server: string,
    readonly timeoutMs: number,
  ) {
    super(`no reply from ${server} within ${timeoutMs} ms`);
    this.name = 'DnsTimeoutError';
  }
}

/** A listener that could not bind, naming the address and the system's reason. */
export class DnsBindError extends Error {
  readonly code = 'DNS_BIND';
  constructor(
    readonly address: string,
    cause: unknown,
  ) {
    const why = (cause as { code?: string }).code ?? (cause as Error).message;
    super(`cannot listen on ${address}: ${why}`, { cause });
    this.name = 'DnsBindError';
  }
}
