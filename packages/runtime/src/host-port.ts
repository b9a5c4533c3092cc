import { isIP } from 'node:net';
import { FlagError } from './errors.js';

export interface HostPort {
  readonly host: string;
  readonly port: number;
}

/**
 * Parses `ip`, `ip:port`, `[v6]:port`, bare `v6`, and dnsmasq's `ip#port`, giving `defaultPort`
 * when none is written. Hostnames are refused: every server we talk to is an address.
 */
export function parseHostPort(text: string, defaultPort: number, flag = 'address'): HostPort {
  const expected = 'an IP address with an optional port: 10.0.0.10, 10.0.0.10:53, 10.0.0.10#53 or [fd00::10]:53';
  let host = text;
  let portText: string | undefined;
  const bracket = /^\[([^\]]+)\](?:[:#](\d+))?$/.exec(text);
  if (bracket) {
    host = bracket[1] as string;
    portText = bracket[2];
  } else if (isIP(text) === 6) {
    host = text;
  } else {
    const m = /^([^:#]+)[:#](\d+)$/.exec(text) ?? /^(.+)#(\d+)$/.exec(text);
    if (m) {
      host = m[1] as string;
      portText = m[2];
    }
  }
  if (isIP(host) === 0) throw new FlagError(flag, text, expected);
  const port = portText === undefined ? defaultPort : Number(portText);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new FlagError(flag, text, expected);
  return { host, port };
}
