import { FlagError, type HostPort, parseHostPort } from '@cluster-dns/runtime';
import { QTYPE } from '@cluster-dns/wire';

export type ProbeType = 'A' | 'AAAA' | 'SRV' | 'ANY';

export interface ProbeSpec {
  readonly label: string;
  readonly server: HostPort;
  /** With its trailing dot. */
  readonly name: string;
  readonly intervalMs: number;
  readonly type: ProbeType;
  readonly qtype: number;
}

export const PROBE_FORM = '<label>,<server>,<dns name>[,<interval seconds>][,<type: A|AAAA|SRV|ANY>]';

/**
 * kube-dns sidecar's `--probe` syntax: `label,server,name[,interval][,type]`. The label matches
 * ^[A-Za-z0-9_]+$, the server gets :53 when it has no port, the name gains its trailing dot, the
 * interval defaults to 5 s and the type to ANY (as kube-dns).
 */
export function parseProbeFlag(raw: string, flag = '--probe'): ProbeSpec {
  const fail = (why: string): never => {
    throw new FlagError(flag, raw, `${PROBE_FORM} (${why})`);
  };
  const parts = raw.split(',');
  if (parts.length < 3 || parts.length > 5) fail(`${parts.length} comma-separated fields, expected 3 to 5`);
  const [label = '', serverText = '', name = '', intervalText, typeText] = parts;
  if (!/^[A-Za-z0-9_]+$/.test(label)) fail(`label ${JSON.stringify(label)} must match ^[A-Za-z0-9_]+$`);
  let server: HostPort;
  try {
    server = parseHostPort(serverText, 53, flag);
  } catch {
    return fail(`server ${JSON.stringify(serverText)} is not ip[:port] or [ipv6]:port`);
  }
  if (name === '' || name.includes(' ')) fail('empty or invalid DNS name');
  let intervalSeconds = 5;
  if (intervalText !== undefined && intervalText !== '') {
    if (!/^\d+$/.test(intervalText) || Number(intervalText) < 1)
      fail(`interval ${JSON.stringify(intervalText)} is not a positive integer`);
    intervalSeconds = Number(intervalText);
  }
  const type = (typeText === undefined || typeText === '' ? 'ANY' : typeText.toUpperCase()) as ProbeType;
  if (!['A', 'AAAA', 'SRV', 'ANY'].includes(type)) fail(`type ${JSON.stringify(typeText)} is not A, AAAA, SRV or ANY`);
  return {
    label,
    server,
    name: name.endsWith('.') ? name : `${name}.`,
    intervalMs: intervalSeconds * 1000,
    type,
    qtype: QTYPE[type],
  };
}
