import { Buffer } from 'node:buffer';
import type { ConsolidateRule, ErrorsConfig, Logger } from '@cluster-dns/runtime';
import { type Next, RCODE_MASK, type Reply, type Stage, typeText } from '@cluster-dns/wire';
import { type BlockScoped, scopedValue } from '../../config/block-scoped.js';
import type { ForwarderRequest } from '../../config/forwarder-request.js';

/** One consolidate rule's window: errors matched since it opened. */
interface Window {
  count: number;
  timer: ReturnType<typeof setTimeout> | undefined;
}

export interface ErrorsStageDeps {
  configs(): readonly BlockScoped<ErrorsConfig>[];
  log: Logger;
  /** Timers, injected so tests move time themselves. */
  setTimer?: (run: () => void, ms: number) => ReturnType<typeof setTimeout>;
}

/**
 * A Corefile's `errors` (coredns/coredns plugin/errors): the error behind a failed answer (an
 * upstream that timed out, refused a connection, or a template that did not run), noted on the
 * request by the stage that met it, is logged as CoreDNS words it, `RCODE NAME TYPE: ERROR`. With
 * `consolidate DURATION REGEXP [LEVEL] [show_first]`, errors matching REGEXP are counted and one
 * line per DURATION says how many (`N errors like '…' occurred in last …`), the first at once
 * with show_first.
 */
export class ErrorsStage implements Stage<ForwarderRequest> {
  readonly name = 'errors';
  readonly counts = { logged: 0, consolidated: 0 };
  private readonly windows = new Map<ConsolidateRule, Window>();

  constructor(private readonly deps: ErrorsStageDeps) {}

  serve(request: ForwarderRequest, next: Next<ForwarderRequest>): Reply | Promise<Reply> {
    const config = scopedValue(this.deps.configs(), request.query.key);
    if (!config) return next(request);
    const replied = next(request);
    if (replied instanceof Promise)
      return replied.then((reply) => {
        this.report(config, request, reply);
        return reply;
      });
    this.report(config, request, replied);
    return replied;
  }

  private report(config: ErrorsConfig, request: ForwarderRequest, reply: Reply): void {
    const error = request.error;
    if (error === undefined) return;
    const q = request.query;
    const rcode = Buffer.isBuffer(reply) && reply.length >= 4 ? reply.readUInt16BE(2) & RCODE_MASK : 2;
    const text = `${rcode} ${q.qname} ${typeText(q.qtype)}: ${error.message}`;
    for (const rule of config.consolidate) {
      if (!rule.pattern.test(error.message)) continue;
      this.consolidate(rule, text, error);
      return;
    }
    this.counts.logged++;
    this.deps.log.error(text, { err: error });
  }

  private consolidate(rule: ConsolidateRule, text: string, error: Error): void {
    this.counts.consolidated++;
    const open = this.windows.get(rule);
    if (open) {
      open.count++;
      return;
    }
    if (rule.showFirst) this.logAt(rule.level, text, { err: error });
    const window: Window = { count: 1, timer: undefined };
    const setTimer = this.deps.setTimer ?? ((run, ms) => setTimeout(run, ms));
    window.timer = setTimer(() => this.close(rule), rule.periodMs);
    if (typeof window.timer === 'object' && 'unref' in window.timer) window.timer.unref();
    this.windows.set(rule, window);
  }

  private close(rule: ConsolidateRule): void {
    const window = this.windows.get(rule);
    this.windows.delete(rule);
    if (!window) return;
    // The one error show_first already logged needs no summary; otherwise the summary counts them all.
    if (rule.showFirst && window.count === 1) return;
    const counted = window.count;
    this.logAt(
      rule.level,
      `${counted} errors like '${rule.patternText}' occurred in last ${goDuration(rule.periodMs)}`,
      {
        errors: counted,
        pattern: rule.patternText,
      },
    );
  }

  private logAt(level: ConsolidateRule['level'], msg: string, fields: Record<string, unknown>): void {
    if (level === 'warning') this.deps.log.warn(msg, fields);
    else if (level === 'info') this.deps.log.info(msg, fields);
    else if (level === 'debug') this.deps.log.debug(msg, fields);
    else this.deps.log.error(msg, fields);
  }

  /** Reports what the open windows hold now (at shutdown, as CoreDNS's OnShutdown does). */
  flush(): void {
    for (const [rule, window] of [...this.windows]) {
      if (window.timer) clearTimeout(window.timer);
      this.close(rule);
    }
  }
}

/** A period as Go prints a time.Duration: 5m0s, 1h0m0s, 30s, 1.5s. */
export function goDuration(ms: number): string {
  if (ms === 0) return '0s';
  if (ms < 1000) return `${ms}ms`;
  const h = Math.floor(ms / 3_600_000);
  const m = Math.floor((ms % 3_600_000) / 60_000);
  const s = (ms % 60_000) / 1000;
  return `${h ? `${h}h` : ''}${h || m ? `${m}m` : ''}${s}s`;
}
