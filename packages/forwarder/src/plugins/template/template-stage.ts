import { Buffer } from 'node:buffer';
import { type TemplateConfig, type TemplateData, TemplateRunError } from '@cluster-dns/runtime';
import {
  buildBareResponse,
  classText,
  type DecodedMessage,
  type DecodedRr,
  type Fqdn,
  isInZone,
  type Next,
  parseRecordText,
  QCLASS,
  QTYPE,
  RCODE,
  RecordTextError,
  type Reply,
  replyFromSections,
  type Stage,
  typeText,
} from '@cluster-dns/wire';
import { type BlockScoped, scopedValue } from '../../config/block-scoped.js';
import type { ForwarderRequest } from '../../config/forwarder-request.js';

/** Extended DNS Errors (RFC 8914): the EDNS0 option's code. */
const EDE_OPTION = 15;

/** What the template stage counts, for coredns_template_* (metrics.ts). */
export interface TemplateCounts {
  /** By zone, class and type. */
  readonly matches: Map<string, number>;
  /** Templates that failed to run, or made text that is not a record, by section. */
  readonly failures: Map<string, number>;
}

export interface TemplateStageDeps {
  /** Each block's templates (a reload swaps them). */
  templates(): readonly BlockScoped<readonly TemplateConfig[]>[];
  /** Looks a CNAME's target up through the whole chain, as CoreDNS's upstream does; undefined if it cannot. */
  lookup?(request: ForwarderRequest, name: Fqdn, qtype: number): Promise<DecodedMessage | undefined>;
}

/** The longest of `zones` holding `name`, or undefined. */
function zoneOf(zones: readonly Fqdn[], name: Fqdn): Fqdn | undefined {
  let best: Fqdn | undefined;
  for (const z of zones) if (isInZone(name, z) && (best === undefined || z.length > best.length)) best = z;
  return best;
}

/** A query's data as CoreDNS's templateData gives it to a template. */
function dataOf(
  t: TemplateConfig,
  request: ForwarderRequest,
  zone: Fqdn,
  regex: RegExp,
  match: RegExpExecArray,
): TemplateData {
  const q = request.query;
  const group: Record<string, string> = {};
  match.forEach((m, i) => {
    group[String(i)] = m ?? '';
  });
  for (const [name, value] of Object.entries(match.groups ?? {})) group[name] = value ?? '';
  return {
    Zone: zone,
    Name: q.key,
    Regex: regex.source,
    Match: [...match].map((m) => m ?? ''),
    Group: group,
    Class: q.qclass !== QCLASS.ANY ? classText(q.qclass) : classText(t.qclass),
    Type: q.qtype !== QTYPE.ANY ? typeText(q.qtype) : typeText(t.qtype),
    Remote: request.context.remoteAddress.replace(/^::ffff:/, ''),
    Question: { Name: q.key, Qtype: q.qtype, Qclass: q.qclass },
    Message: { Id: q.id, Rcode: 0, Opcode: 0 },
    Meta: () => '',
    Var: {},
  };
}

type Matched = { data: TemplateData; zone: Fqdn } | 'next' | 'servfail';

/**
 * A Corefile's `template` (coredns/coredns plugin/template): the first template of the block whose
 * zone, class, type and a regex match the question answers with records made from its templates
 * (AA, its rcode); one whose zone, class and type match but no regex does ends in SERVFAIL unless it
 * falls through. A CNAME answered for A or AAAA has its target looked up through the chain.
 */
export class TemplateStage implements Stage<ForwarderRequest> {
  readonly name = 'template';
  readonly counts: TemplateCounts = { matches: new Map(), failures: new Map() };

  constructor(private readonly deps: TemplateStageDeps) {}

  serve(request: ForwarderRequest, next: Next<ForwarderRequest>): Reply | Promise<Reply> {
    const q = request.query;
    const templates = scopedValue(this.deps.templates(), q.key);
    if (!templates) return next(request);
    for (const t of templates) {
      const matched = this.match(t, request);
      if (matched === 'next') continue;
      if (matched === 'servfail') return this.bare(request, RCODE.SERVFAIL);
      const key = `${matched.zone}\t${matched.data.Class}\t${matched.data.Type}`;
      this.counts.matches.set(key, (this.counts.matches.get(key) ?? 0) + 1);
      if (t.rcode === RCODE.SERVFAIL) return this.bare(request, RCODE.SERVFAIL);
      return this.answer(t, request, matched.data);
    }
    return next(request);
  }

  private bare(request: ForwarderRequest, rcode: number): Buffer {
    return buildBareResponse(request.query, rcode, {
      recursionAvailable: true,
      udpPayloadBytes: request.udpPayloadBytes,
    });
  }

  private match(t: TemplateConfig, request: ForwarderRequest): Matched {
    const q = request.query;
    const zone = zoneOf(t.zones ?? [], q.key);
    if (zone === undefined) return 'next';
    if (t.qclass !== QCLASS.ANY && q.qclass !== QCLASS.ANY && q.qclass !== t.qclass) return 'next';
    if (t.qtype !== QTYPE.ANY && q.qtype !== QTYPE.ANY && q.qtype !== t.qtype) return 'next';
    for (const regex of t.match) {
      const m = regex.exec(q.key);
      if (m) return { data: dataOf(t, request, zone, regex, m), zone };
    }
    const falls =
      t.fallthrough !== undefined && (t.fallthrough.length === 0 || t.fallthrough.some((z) => isInZone(q.key, z)));
    return falls ? 'next' : 'servfail';
  }

  private lastError: Error | undefined;

  private records(section: string, texts: TemplateConfig['answer'], data: TemplateData): DecodedRr[] | undefined {
    const out: DecodedRr[] = [];
    for (const text of texts) {
      try {
        out.push(parseRecordText(text.run(data)));
      } catch (error) {
        if (!(error instanceof TemplateRunError || error instanceof RecordTextError)) throw error;
        this.counts.failures.set(section, (this.counts.failures.get(section) ?? 0) + 1);
        // For `errors`, as CoreDNS's template returns the error.
        this.lastError = error;
        return undefined;
      }
    }
    return out;
  }

  private answer(t: TemplateConfig, request: ForwarderRequest, data: TemplateData): Reply | Promise<Reply> {
    const answer = this.records('answer', t.answer, data);
    const additional = this.records('additional', t.additional, data);
    const authority = this.records('authority', t.authority, data);
    if (!answer || !additional || !authority) {
      request.error = this.lastError;
      return this.bare(request, RCODE.SERVFAIL);
    }
    const q = request.query;
    const option = t.ederror
      ? {
          code: EDE_OPTION,
          data: Buffer.concat([
            Buffer.from([t.ederror.code >> 8, t.ederror.code & 0xff]),
            Buffer.from(t.ederror.reason ?? ''),
          ]),
        }
      : undefined;
    const reply = (extra: readonly DecodedRr[]) =>
      replyFromSections(
        q,
        { rcode: t.rcode, authoritative: true, answer: [...answer, ...extra], authority, additional },
        request.limitBytes,
        { udpPayloadBytes: request.udpPayloadBytes, ...(option ? { option } : {}) },
      );
    const cnames = answer.filter((r) => r.type === QTYPE.CNAME && r.target !== undefined);
    const lookup = this.deps.lookup;
    if (!lookup || cnames.length === 0 || (q.qtype !== QTYPE.A && q.qtype !== QTYPE.AAAA)) return reply([]);
    return Promise.all(cnames.map((c) => lookup(request, c.target as Fqdn, q.qtype))).then((found) =>
      reply(found.flatMap((m) => m?.answers ?? [])),
    );
  }
}
