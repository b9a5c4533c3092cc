import { Buffer } from 'node:buffer';
import type { Edns0Rule } from '@cluster-dns/runtime';
import {
  addressOctets,
  CLIENT_ADDRESS_OPTION,
  type EdnsOption,
  encodeClientSubnet,
  PROGRAMMING_TIMES_OPTION,
  withoutIpv4Mapping,
} from '@cluster-dns/wire';

/** Who asked, for an edns0 rule's data: a variable, a client subnet. */
export interface RewriteAsker {
  readonly remoteAddress: string;
  readonly remotePort: number;
  readonly transport: 'udp' | 'tcp';
  /** The options of the client's OPT record, read only when an edns0 rule applies. */
  options(): readonly EdnsOption[] | undefined;
}

const NSID = 3;
const SUBNET = 8;

/**
 * Options a client's query carries that never go on upstream with it: they are between the client
 * and us (cookie, TCP keepalive, padding: RFC 7873, 7828, 7830) or ours (the client a node cache
 * names, the programming times of a push).
 */
const HOP_BY_HOP = new Set([10, 11, 12, CLIENT_ADDRESS_OPTION, PROGRAMMING_TIMES_OPTION]);

/** Codes miekg/dns reads as an option of its own kind: an `edns0 local` rule never matches them. */
const NOT_LOCAL = new Set([1, 2, NSID, 5, 6, 7, SUBNET, 9, 10, 11, 12, 15]);

/** The client's options as an edns0 rule starts from: those that may go on upstream. */
export function passedOptions(asker: RewriteAsker): EdnsOption[] {
  return (asker.options() ?? []).filter((o) => !HOP_BY_HOP.has(o.code));
}

function variableData(
  rule: Extract<Edns0Rule, { option: 'local' }>,
  qname: string,
  qtype: number,
  asker: RewriteAsker,
) {
  const data = rule.data;
  if (data === undefined || 'bytes' in data) return data?.bytes;
  switch (data.variable) {
    case 'qname':
      return Buffer.from(qname, 'utf8');
    case 'qtype':
      return Buffer.from([qtype >> 8, qtype & 0xff]);
    case 'client_ip':
      return Buffer.from(addressOctets(withoutIpv4Mapping(asker.remoteAddress)));
    case 'client_port':
      return Buffer.from([asker.remotePort >> 8, asker.remotePort & 0xff]);
    case 'protocol':
      return Buffer.from(asker.transport, 'utf8');
  }
}

/**
 * One edns0 rule on the options the question goes on with (changed in place), as CoreDNS's
 * edns0.go does it; whether it applied (CoreDNS's RewriteDone), which `stop` acts on.
 */
export function applyEdns0(
  rule: Edns0Rule,
  options: EdnsOption[],
  question: { qname: string; qtype: number },
  asker: RewriteAsker,
): boolean {
  const code = rule.option === 'local' ? rule.code : rule.option === 'nsid' ? NSID : SUBNET;
  const isTarget = (o: EdnsOption) => o.code === code && (rule.option !== 'local' || !NOT_LOCAL.has(o.code));
  if (rule.action === 'unset') {
    for (let i = options.length - 1; i >= 0; i--) if ((options[i] as EdnsOption).code === code) options.splice(i, 1);
    return true;
  }
  let data: Buffer | undefined;
  if (rule.option === 'local') {
    data = variableData(rule, question.qname, question.qtype, asker);
    if (data === undefined) return false;
  } else if (rule.option === 'nsid') data = Buffer.alloc(0);
  else data = encodeClientSubnet(asker.remoteAddress, rule.v4Bits, rule.v6Bits);
  const at = options.findIndex(isTarget);
  if (at >= 0) {
    if (rule.action === 'set' || rule.action === 'replace') {
      options[at] = { code, data };
      return true;
    }
    // CoreDNS appends a second local or NSID option beside the first, but not a second subnet,
    // nor a second local one whose data is a variable.
    if (rule.option === 'subnet' || (rule.option === 'local' && rule.data && 'variable' in rule.data)) return false;
  }
  if (rule.action === 'append' || rule.action === 'set') {
    options.push({ code, data });
    return true;
  }
  return false;
}
