import type { Buffer } from 'node:buffer';
import { FLAG, RCODE_MASK } from './constants.js';
import { MessageWriter } from './message-writer.js';
import type { ParsedQuery } from './query.js';
import type { DecodedRr } from './records.js';
import { finishFromTemplate, type TemplatePatch } from './response.js';

/** The sections of a reply a stage makes itself (a template, a zone file, a hosts table). */
export interface ReplySections {
  readonly rcode: number;
  /** Authoritative (AA): a zone of its own answered. */
  readonly authoritative: boolean;
  readonly answer: readonly DecodedRr[];
  readonly authority?: readonly DecodedRr[];
  readonly additional?: readonly DecodedRr[];
  /** RA: the server recurses for this client (a forwarder's answers say so). */
  readonly recursionAvailable?: boolean;
  /** TC: what was put together came from a truncated answer (dns64's from its A lookup). */
  readonly truncated?: boolean;
}

/**
 * The reply to `query` from sections: written once (names compressed), then finished as every
 * reply is (ID, case of the question as asked, OPT, whole-record truncation to `limitBytes`).
 */
export function replyFromSections(
  query: ParsedQuery,
  sections: ReplySections,
  limitBytes: number,
  patch?: TemplatePatch,
): Buffer {
  const writer = new MessageWriter(512).question(query.key, query.qtype, query.qclass);
  for (const rr of sections.answer) writer.record(1, rr);
  for (const rr of sections.authority ?? []) writer.record(2, rr);
  for (const rr of sections.additional ?? []) writer.record(3, rr);
  const flags =
    FLAG.QR |
    (sections.authoritative ? FLAG.AA : 0) |
    (sections.recursionAvailable === false ? 0 : FLAG.RA) |
    (sections.truncated ? FLAG.TC : 0) |
    (sections.rcode & RCODE_MASK);
  return finishFromTemplate(writer.finish(0, flags), query, limitBytes, patch);
}
