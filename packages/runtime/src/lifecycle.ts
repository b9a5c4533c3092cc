import { ClusterDnsError, FlagError, UnknownFlagError } from './errors.js';
import { type FlagDef, type FlagValues, formatFlagHelp, parseFlags } from './flags.js';
import { createLogger, type Logger, levelFromVerbosity } from './logger.js';

/** What a started process hands back: how to stop it. */
export interface RunningService {
  /** Fail readiness, wait out the lameduck period, close listeners, drain. Safe to call twice. */
  shutdown(): Promise<void>;
}

export interface MainSpec<Table extends Record<string, FlagDef<unknown>>> {
  program: string;
  summary: string;
  flags: Table;
  /** Bounds the whole shutdown; past it the process exits 1. */
  shutdownDeadlineMs?: number;
  /**
   * `signal` is aborted by SIGTERM or SIGINT while starting: a start that may wait long (the demo
   * waiting for its children) stops what it began and rejects, and the process exits 0. A start
   * that ignores it is stopped once started, as before.
   */
  /**
   * A command that runs instead of the service when it returns an exit code (`-validate`: print
   * and exit); undefined goes on to start.
   */
  command?(
    values: FlagValues<Table>,
    io: { stdout(text: string): void; stderr(text: string): void },
  ): Promise<number | undefined> | number | undefined;
  start(
    values: FlagValues<Table>,
    context: { log: Logger; given: ReadonlySet<string>; signal: AbortSignal },
  ): Promise<RunningService>;
}

export interface ProcessHooks {
  argv: readonly string[];
  exit(code: number): void;
  onSignal(signal: 'SIGTERM' | 'SIGINT', handler: () => void): void;
  onFatal(handler: (error: unknown) => void): void;
  stdout(text: string): void;
  stderr(text: string): void;
}

/**
 * The one entry path of all three binaries: flags → start → ready → signals → drain → exit.
 * A bad flag (or Corefile) prints one line and exits 2; a failed start exits 1; SIGTERM drains and exits 0;
 * a second signal or a missed deadline exits 1.
 */
export async function runMain<Table extends Record<string, FlagDef<unknown>>>(
  spec: MainSpec<Table>,
  hooks: ProcessHooks,
): Promise<void> {
  let parsed: ReturnType<typeof parseFlags<Table>>;
  try {
    parsed = parseFlags(spec.flags, hooks.argv);
  } catch (error) {
    if (error instanceof FlagError || error instanceof UnknownFlagError) {
      hooks.stderr(`${spec.program}: ${error.message}${error.hint ? ` (${error.hint})` : ''}\n`);
      hooks.exit(2);
      return;
    }
    throw error;
  }
  if (parsed.help) {
    hooks.stdout(formatFlagHelp(spec.program, spec.summary, spec.flags));
    hooks.exit(0);
    return;
  }
  if (spec.command) {
    const code = await spec.command(parsed.values, { stdout: hooks.stdout, stderr: hooks.stderr });
    if (code !== undefined) {
      hooks.exit(code);
      return;
    }
  }
  const verbosity =
    typeof (parsed.values as Record<string, unknown>).v === 'number' ? (parsed.values as Record<string, number>).v : 0;
  const log = createLogger({ component: spec.program, level: levelFromVerbosity(verbosity ?? 0), write: hooks.stdout });
  hooks.onFatal((error) => {
    log.fatal('unexpected error, exiting', { err: error });
    hooks.exit(1);
  });

  // Signals are taken from the start: one that arrives while starting is acted on once started,
  // so a SIGTERM right after the ready line still drains instead of killing the process.
  let service: RunningService | undefined;
  let pendingSignal: string | undefined;
  let stopping = false;
  const starting = new AbortController();
  // One Ctrl-C can arrive twice: from the terminal to the whole process group, and passed on by a
  // parent (pnpm forwards SIGINT to its script). The same signal within this window is that one.
  let lastSignal: { signal: string; atMs: number } | undefined;
  const stop = (signal: string, replayed = false) => {
    const now = performance.now();
    if (!replayed && lastSignal?.signal === signal && now - lastSignal.atMs < SAME_SIGNAL_MS) return;
    lastSignal = { signal, atMs: now };
    if (stopping) {
      log.warn('second signal, exiting now', { signal });
      hooks.exit(1);
      return;
    }
    if (!service) {
      if (pendingSignal) {
        log.warn('second signal while starting, exiting now', { signal });
        hooks.exit(1);
      }
      pendingSignal = signal;
      starting.abort(new Error(`${signal} while starting`));
      return;
    }
    stopping = true;
    const running = service;
    log.info('shutting down', { signal });
    const deadline = setTimeout(() => {
      log.error('shutdown deadline passed, exiting', { deadlineMs: spec.shutdownDeadlineMs });
      hooks.exit(1);
    }, spec.shutdownDeadlineMs ?? 30_000);
    deadline.unref();
    running.shutdown().then(
      () => {
        clearTimeout(deadline);
        log.info('stopped');
        hooks.exit(0);
      },
      (error: unknown) => {
        log.error('shutdown failed', { err: error });
        hooks.exit(1);
      },
    );
  };
  hooks.onSignal('SIGTERM', () => stop('SIGTERM'));
  hooks.onSignal('SIGINT', () => stop('SIGINT'));

  try {
    service = await spec.start(parsed.values, { log, given: parsed.given, signal: starting.signal });
  } catch (error) {
    if (starting.signal.aborted) {
      log.info('stopped while starting', { signal: pendingSignal });
      hooks.exit(0);
      return;
    }
    // A config file that does not parse is the same kind of mistake as a bad flag.
    const flagProblem =
      error instanceof FlagError || (error instanceof ClusterDnsError && error.code === 'COREFILE_INVALID');
    log.fatal(flagProblem ? 'invalid configuration' : 'start failed', { err: error });
    if (error instanceof ClusterDnsError && error.hint) log.info('hint', { hint: error.hint });
    const hint = error instanceof ClusterDnsError && error.hint ? ` (${error.hint})` : '';
    hooks.stderr(`${spec.program}: ${error instanceof Error ? error.message : String(error)}${hint}\n`);
    hooks.exit(flagProblem ? 2 : 1);
    return;
  }
  if (pendingSignal) stop(pendingSignal, true);
}

/** A repeat of the same signal within this long is one signal delivered twice, not a second one. */
const SAME_SIGNAL_MS = 300;

/** The real process behind ProcessHooks; only main.ts files call this. */
export function nodeProcessHooks(): ProcessHooks {
  return {
    argv: process.argv.slice(2),
    exit: (code) => {
      process.exitCode = code;
      // Let stdout drain the last log lines before leaving.
      setImmediate(() => process.exit(code));
    },
    onSignal: (signal, handler) => {
      process.on(signal, handler);
    },
    onFatal: (handler) => {
      process.on('unhandledRejection', handler);
      process.on('uncaughtException', handler);
    },
    stdout: (text) => process.stdout.write(text),
    stderr: (text) => process.stderr.write(text),
  };
}

/** Closes things in reverse start order; each close is awaited even if an earlier one threw. */
export class CloseStack {
  private readonly closers: Array<{ name: string; close: () => Promise<void> | void }> = [];
  private closing: Promise<void> | undefined;

  push(name: string, close: () => Promise<void> | void): void {
    this.closers.push({ name, close });
  }

  close(log?: Logger): Promise<void> {
    this.closing ??= (async () => {
      for (const { name, close } of this.closers.reverse()) {
        try {
          await close();
        } catch (error) {
          log?.warn('close failed', { what: name, err: error });
        }
      }
    })();
    return this.closing;
  }
}

/** Resolves after `ms`, without keeping the event loop alive. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
