import { Buffer } from 'node:buffer';
import type { Dns64Config } from '@cluster-dns/runtime';
import {
  canonicalIpv6,
  type DecodedMessage,
  type DecodedRr,
  decodeMessage,
  type Fqdn,
  ipv6Groups,
  type Next,
  QCLASS,
  QTYPE,
  RCODE,
  type Reply,
  replyFromSections,
  type Stage,
} from '@cluster-dns/wire';
import { type BlockScoped, scopedValue } from '../../config/block-scoped.js';
import type { ForwarderRequest } from '../../config/forwarder-request.js';

/** An IPv4 address embedded in an IPv6 prefix of 32 … 96 bits, RFC 6052 §2.2 (octets 8 … 15 skip octet 8). */
export function synthesizedAddress(prefix: Dns64Config['prefix'], ipv4: string): string {
  const groups = ipv6Groups(prefix.address);
  const v6 = Buffer.alloc(16);
  for (const [i, g] of groups.entries()) v6.writeUInt16BE(g, i * 2);
  const v4 = ipv4.split('.').map(Number);
  let i = prefix.bits / 8;
  let j = 0;
  for (; i < 8; i++, j++) v6[i] = v4[j] as number;
  if (i === 8) i++;
  for (; j < 4; i++, j++) v6[i] = v4[j] as number;
  for (; i < 16; i++) v6[i] = 0;
  const out: string[] = [];
  for (let k = 0; k < 16; k += 2) out.push(v6.readUInt16BE(k).toString(16));
  return canonicalIpv6(out.join(':'));
}

export interface Dns64StageDeps {
  blocks(): readonly BlockScoped<Dns64Config>[];
  /** Looks a name's A records up through the whole chain, as CoreDNS's upstream does. */
  lookup(request: ForwarderRequest, name: Fqdn, qtype: number): Promise<DecodedMessage | undefined>;
}

const isIpv4Client = (address: string) => !address.includes(':') || address.startsWith('::ffff:');

/**
 * A Corefile's `dns64` (coredns/coredns plugin/dns64, RFC 6147): an AAAA question from an IPv6
 * client (any client with `allow_ipv4`) whose answer holds no AAAA (or any answer but NXDOMAIN,
 * with `translate_all`) gets AAAA records made from the name's A records in the prefix, each TTL
 * the A's or the SOA's, whichever is less. The A lookup goes through the whole chain (its cache).
 */
export class Dns64Stage implements Stage<ForwarderRequest> {
  readonly name = 'dns64';
  readonly counts = { translated: 0 };

  constructor(private readonly deps: Dns64StageDeps) {}

  serve(request: ForwarderRequest, next: Next<ForwarderRequest>): Reply | Promise<Reply> {
    const q = request.query;
    if (q.qtype !== QTYPE.AAAA || q.qclass !== QCLASS.IN) return next(request);
    const config = scopedValue(this.deps.blocks(), q.key);
    if (!config || (!config.allowIpv4 && isIpv4Client(request.context.remoteAddress))) return next(request);
    const answered = next(request);
    return answered instanceof Promise
      ? answered.then((reply) => this.after(request, config, reply))
      : this.after(request, config, answered);
  }

  private async after(request: ForwarderRequest, config: Dns64Config, reply: Reply): Promise<Reply> {
    if (!Buffer.isBuffer(reply) || reply.length < 12) return reply;
    const original = decodeMessage(reply);
    if (original.flags.rcode === RCODE.NXDOMAIN) return reply;
    if (!config.translateAll && original.answers.some((r) => r.type === QTYPE.AAAA)) return reply;
    const found = await this.deps.lookup(request, request.query.key, QTYPE.A);
    if (!found)
      return replyFromSections(
        request.query,
        { rcode: RCODE.SERVFAIL, authoritative: false, answer: [] },
        request.limitBytes,
        { udpPayloadBytes: request.udpPayloadBytes },
      );
    const soaTtl = original.authorities.find((r) => r.type === QTYPE.SOA)?.ttl ?? 600;
    const answer: DecodedRr[] = found.answers.map((rr) =>
      rr.type === QTYPE.A && rr.address !== undefined
        ? {
            name: rr.name,
            type: QTYPE.AAAA,
            class: rr.class,
            ttl: Math.min(rr.ttl, soaTtl),
            address: synthesizedAddress(config.prefix, rr.address),
          }
        : rr,
    );
    this.counts.translated++;
    return replyFromSections(
      request.query,
      {
        rcode: RCODE.NOERROR,
        authoritative: false,
        truncated: found.flags.tc,
        answer,
        authority: found.authorities,
        additional: found.additionals.filter((r) => r.type !== QTYPE.OPT),
      },
      request.limitBytes,
      { udpPayloadBytes: request.udpPayloadBytes },
    );
  }
}
