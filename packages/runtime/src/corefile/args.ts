import { isIP } from 'node:net';
import { type Fqdn, ipv6Nibbles, isValidName, toFqdn } from '@cluster-dns/wire';
import { parseGoDurationMs } from '../duration.js';
import type { HostPort } from '../host-port.js';
import { CorefileError, type CorefileWarning, type Directive, type LineOrigin } from './parse.js';

const originOf = (d: LineOrigin): LineOrigin =>
  d.via ? { line: d.line, file: d.file, via: d.via } : { line: d.line, file: d.file };

/** Reading one directive's arguments, each failure naming the line, the plugin and the option. */
export class DirectiveArgs {
  constructor(
    readonly directive: Directive,
    readonly source: string,
    /** The plugin the directive belongs to (itself for a plugin line). */
    readonly plugin = directive.name,
    /** Told of what runs but deserves a line in the log (an option accepted and ignored). */
    readonly onWarning?: (warning: CorefileWarning) => void,
  ) {}

  /** A warning naming the line and the plugin: the Corefile still runs. */
  warn(message: string): void {
    const what = this.plugin === this.directive.name ? this.plugin : `${this.plugin} ${this.directive.name}`;
    this.onWarning?.({ ...originOf(this.directive), message: `${what}: ${message}` });
  }

  fail(message: string, at: { line: number; file?: string } = this.directive): never {
    const what = this.plugin === this.directive.name ? this.plugin : `${this.plugin} ${this.directive.name}`;
    throw new CorefileError(at.line, `${what}: ${message}`, at.file ?? this.directive.file ?? this.source);
  }

  /** A sub-directive of this one's block, read with the same plugin name. */
  sub(directive: Directive): DirectiveArgs {
    return new DirectiveArgs(directive, this.source, this.plugin, this.onWarning);
  }

  count(min: number, max: number, form: string): readonly string[] {
    const { args } = this.directive;
    if (args.length < min || args.length > max) this.fail(`expected ${form}, got ${args.length} argument(s)`);
    return args;
  }

  noBlock(): void {
    if (this.directive.block) this.fail('takes no { … } block');
  }

  integer(raw: string | undefined, what: string, min = 0, max = Number.MAX_SAFE_INTEGER): number {
    if (raw === undefined || !/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max)
      this.fail(
        `${what} must be an integer from ${min}${max < Number.MAX_SAFE_INTEGER ? ` to ${max}` : ' up'}, got ${JSON.stringify(raw ?? '')}`,
      );
    return Number(raw);
  }

  /** One of `choices`, or an error listing them. */
  oneOf<T extends string>(raw: string | undefined, choices: readonly T[], what: string): T {
    if (raw === undefined || !choices.includes(raw as T))
      return this.fail(`${what} must be ${choices.join(', ')}; got ${JSON.stringify(raw ?? '')}`);
    return raw as T;
  }

  durationMs(raw: string | undefined, what: string): number {
    if (raw === undefined) this.fail(`${what} needs a duration (such as 30s)`);
    try {
      return parseGoDurationMs(raw, what);
    } catch {
      return this.fail(`${what} must be a duration such as 30s or 1m, got ${JSON.stringify(raw)}`);
    }
  }

  /** `host:port`, `:port`, `host` (with the default port), `[v6]:port`; `dns://` allowed. */
  address(raw: string, defaultHost: string, defaultPort: number): HostPort {
    const text = raw.replace(/^dns:\/\//, '');
    const m = /^(?:\[([^\]]+)\]|([^:[\]]*))(?::(\d+))?$/.exec(text) ?? /^([0-9a-fA-F:]+)$/.exec(text);
    const host = (m?.[1] ?? m?.[2] ?? '') || defaultHost;
    const port = m?.[3] === undefined ? defaultPort : Number(m[3]);
    if (!m || isIP(host === 'localhost' ? '127.0.0.1' : host) === 0 || port < 1 || port > 65535)
      this.fail(`${JSON.stringify(raw)} is not an IP address with an optional port`);
    return { host: host === 'localhost' ? '127.0.0.1' : host, port };
  }

  /** Zone names as CoreDNS takes them (a trailing dot optional, `.` for the root). */
  zones(raw: readonly string[]): Fqdn[] {
    return raw.map((z) => {
      const reverse = reverseZoneOfCidr(z);
      if (reverse) return reverse;
      if (z !== '.' && !isValidName(z)) this.fail(`${JSON.stringify(z)} is not a zone name`);
      return toFqdn(z);
    });
  }
}

/**
 * A CIDR on an octet (IPv4) or nibble (IPv6) boundary as its reverse zone, as CoreDNS's
 * plugin.Host normalises one: `10.0.0.0/8` is `10.in-addr.arpa.`. Undefined for anything else.
 */
export function reverseZoneOfCidr(text: string): Fqdn | undefined {
  const m = /^([^/]+)\/(\d+)$/.exec(text);
  if (!m) return undefined;
  const address = m[1] as string;
  const bits = Number(m[2]);
  if (isIP(address) === 4 && bits % 8 === 0 && bits <= 32) {
    const octets = address
      .split('.')
      .slice(0, bits / 8)
      .reverse();
    return toFqdn([...octets, 'in-addr', 'arpa'].join('.'));
  }
  if (isIP(address) === 6 && bits % 4 === 0 && bits <= 128) {
    const nibbles = ipv6Nibbles(address)
      .slice(0, bits / 4)
      .split('')
      .reverse();
    return toFqdn([...nibbles, 'ip6', 'arpa'].join('.'));
  }
  return undefined;
}
