import { Buffer } from 'node:buffer';
import { performance } from 'node:perf_hooks';
import type { Logger, LogRule, ResponseClass } from '@cluster-dns/runtime';
import {
  isInZone,
  type Next,
  QTYPE,
  RCODE,
  RCODE_MASK,
  type Reply,
  rcodeLabel,
  type Stage,
  scanResponse,
  typeLabel,
} from '@cluster-dns/wire';
import { type BlockScoped, scopedValue } from '../../config/block-scoped.js';
import type { ForwarderRequest } from '../../config/forwarder-request.js';
import { replaceLabels } from './replacer.js';

/** CoreDNS's response classes (plugin/pkg/response): success, denial (NXDOMAIN, NODATA), error. */
export function responseClassOf(reply: Buffer | undefined): Exclude<ResponseClass, 'all'> {
  if (reply === undefined || reply.length < 12) return 'error';
  const rcode = reply.readUInt16BE(2) & RCODE_MASK;
  if (rcode === RCODE.NXDOMAIN) return 'denial';
  if (rcode !== RCODE.NOERROR) return 'error';
  if (reply.readUInt16BE(6) > 0) return 'success';
  // NOERROR and no answer: NODATA when the authority holds a SOA, a delegation when it holds NS.
  const scanned = scanResponse(reply);
  const authority = scanned.records.filter((r) => r.section === 'authority');
  return authority.some((r) => r.type === QTYPE.NS) && !authority.some((r) => r.type === QTYPE.SOA)
    ? 'success'
    : 'denial';
}

export interface LogStageDeps {
  rules(): readonly BlockScoped<readonly LogRule[]>[];
  log: Logger;
  /** The pod that asked, when a trusted node cache named one (undefined: the sender is the asker). */
  podOf(request: ForwarderRequest): string | undefined;
}

/**
 * A Corefile's `log` (coredns/coredns plugin/log): the first rule whose name scope covers the
 * question logs its answer, when the answer's class is one the rule takes, as one JSON line: the
 * rule's format filled by CoreDNS's replacer (`text`), and the same facts as fields, with `pod`
 * naming the pod behind a node cache. It sees every query its block gets, the express lane's too:
 * while a rule logs more than errors, hits take the chain (server/forwarder.ts).
 */
export class LogStage implements Stage<ForwarderRequest> {
  readonly name = 'log';
  readonly counts = { logged: 0 };

  constructor(private readonly deps: LogStageDeps) {}

  serve(request: ForwarderRequest, next: Next<ForwarderRequest>): Reply | Promise<Reply> {
    const rules = scopedValue(this.deps.rules(), request.query.key);
    const rule = rules?.find((r) => isInZone(request.query.key, r.scope));
    if (!rule) return next(request);
    const started = performance.now();
    const replied = next(request);
    if (replied instanceof Promise)
      return replied.then((reply) => {
        this.write(rule, request, reply, started);
        return reply;
      });
    this.write(rule, request, replied, started);
    return replied;
  }

  private write(rule: LogRule, request: ForwarderRequest, reply: Reply, started: number): void {
    const first = Buffer.isBuffer(reply) ? (reply.length ? reply : undefined) : undefined;
    const cls = responseClassOf(first);
    if (!rule.classes.has('all') && !rule.classes.has(cls)) return;
    this.counts.logged++;
    const q = request.query;
    const pod = this.deps.podOf(request);
    this.deps.log.info('query', {
      text: replaceLabels(rule.format, { request, reply: first, durationMs: performance.now() - started }),
      remote: request.context.remoteAddress,
      port: request.context.remotePort,
      ...(pod ? { pod } : {}),
      name: q.qname,
      type: typeLabel(q.qtype),
      proto: request.context.transport,
      rcode: first ? rcodeLabel(first.readUInt16BE(2) & RCODE_MASK) : '-',
      class: cls,
    });
  }
}
