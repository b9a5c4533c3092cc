import type { Buffer } from 'node:buffer';
import { classText, FLAG, OPCODE_MASK, OPCODE_SHIFT, RCODE_MASK, rcodeName, typeText } from '@cluster-dns/wire';
import type { ForwarderRequest } from '../../config/forwarder-request.js';

/** What the placeholders read: the request, the reply (if one was written) and the time taken. */
export interface ReplaceInput {
  readonly request: ForwarderRequest;
  readonly reply: Buffer | undefined;
  readonly durationMs: number;
  /** The server's own address ({local}); `-` when not known. */
  readonly local?: string;
}

const bracketed = (address: string) => (address.includes(':') ? `[${address}]` : address);

function responseFlags(reply: Buffer): string {
  const word = reply.readUInt16BE(2);
  const flagNames: Array<[number, string]> = [
    [FLAG.QR, 'qr'],
    [FLAG.AA, 'aa'],
    [FLAG.TC, 'tc'],
    [FLAG.RD, 'rd'],
    [FLAG.RA, 'ra'],
    [0x0040, 'z'],
    [FLAG.AD, 'ad'],
    [FLAG.CD, 'cd'],
  ];
  return flagNames
    .filter(([bit]) => (word & bit) !== 0)
    .map(([, name]) => name)
    .join(',');
}

/** The value of one label, or undefined for a label CoreDNS's replacer does not know (kept as written). */
function labelValue(label: string, input: ReplaceInput): string | undefined {
  const { request, reply } = input;
  const q = request.query;
  const written = reply !== undefined && reply.length >= 12;
  switch (label) {
    case 'type':
      return typeText(q.qtype);
    case 'name':
      return q.qname.endsWith('.') ? q.qname : `${q.qname}.`;
    case 'class':
      return classText(q.qclass);
    case 'proto':
      return request.context.transport;
    case 'remote':
      return bracketed(request.context.remoteAddress);
    case 'local':
      return input.local ? bracketed(input.local) : '-';
    case 'port':
      return String(request.context.remotePort);
    case 'size':
      return String(q.raw.length);
    case '>id':
      return String(q.id);
    case '>opcode':
      return String((q.raw.readUInt16BE(2) & OPCODE_MASK) >> OPCODE_SHIFT);
    case '>do':
      return String(q.edns?.dnssecOk ?? false);
    case '>bufsize':
      return String(q.edns ? Math.max(512, q.edns.udpSize) : 512);
    case 'rcode':
      return written ? rcodeName(reply.readUInt16BE(2) & RCODE_MASK).replace(/^RCODE/, '') : '-';
    case 'rsize':
      return written ? String(reply.length) : '0';
    case '>rflags':
      return written ? responseFlags(reply) : '-';
    case 'duration':
      return `${(input.durationMs / 1000).toFixed(9).replace(/0+$/, '').replace(/\.$/, '.0')}s`;
    default:
      // Metadata ({/forward/upstream}): none is kept here, so every one reads as CoreDNS's empty value.
      return label.startsWith('/') && label.length > 1 ? '-' : undefined;
  }
}

/**
 * CoreDNS's replacer (plugin/pkg/replacer) over `format`: each innermost `{label}` it knows
 * replaced, any other brace left as written.
 */
export function replaceLabels(format: string, input: ReplaceInput): string {
  let out = '';
  let at = 0;
  for (;;) {
    const close = format.indexOf('}', at);
    if (close < 0) break;
    const open = format.lastIndexOf('{', close);
    if (open < at) {
      out += format.slice(at, close + 1);
      at = close + 1;
      continue;
    }
    const value = labelValue(format.slice(open + 1, close), input);
    out += format.slice(at, open) + (value ?? format.slice(open, close + 1));
    at = close + 1;
  }
  return out + format.slice(at);
}
