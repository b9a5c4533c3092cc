import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

export interface LogLine {
  msg?: string;
  level?: string;
  [key: string]: unknown;
}

export interface LaunchOptions {
  /** Path of the script node runs, such as packages/forwarder/dist/main.js. */
  script: string;
  /** A command to run node under, such as a namespace's `ip netns exec <name>`. */
  prefix?: readonly string[];
  /** The node binary to run (default: this one); node22Binary() gives one with SO_REUSEPORT. */
  nodeBinary?: string;
  /** Arguments for node itself, before the script (`--cpu-prof`, which NODE_OPTIONS refuses). */
  nodeArgs?: readonly string[];
  args?: readonly string[];
  env?: Record<string, string>;
  /** Resolve when a log line with this msg appears (default "ready"). */
  readyMsg?: string;
  readyTimeoutMs?: number;
  /** Called with each stdout/stderr line, for the demo's prefixed output. */
  onLine?: (line: string, stream: 'stdout' | 'stderr') => void;
  /**
   * Run in its own process group, so a terminal's Ctrl-C reaches only the launcher, which then
   * stops the child once, with SIGTERM.
   */
  ownProcessGroup?: boolean;
  /** Aborted: the child is sent SIGTERM, and a launch still waiting for its ready line rejects. */
  signal?: AbortSignal;
}

export interface LaunchedProcess {
  readonly child: ChildProcess;
  /** The fields of the ready line: the bound ports come from here. */
  readonly ready: LogLine;
  readonly logs: LogLine[];
  readonly stderr: string[];
  /**
   * Resolves with the first log line (seen or to come) that matches; rejects after `timeoutMs`, or
   * when the process exits, with `what` and the process's last lines in the message.
   */
  waitForLog(predicate: (line: LogLine) => boolean, timeoutMs?: number, what?: string): Promise<LogLine>;
  /** The last `n` log and stderr lines, for a failure message that says what the process did. */
  tail(n?: number): string;
  /** Sends a signal and waits for the exit code (null if it was killed). */
  stop(signal?: NodeJS.Signals, timeoutMs?: number): Promise<number | null>;
  readonly exited: Promise<number | null>;
}

/** Spawns `node script args`, parses its JSON log lines, and waits for its ready line. */
export async function launchProcess(options: LaunchOptions): Promise<LaunchedProcess> {
  const readyTimeout = new Error(`${options.script} did not log ${options.readyMsg ?? 'ready'} in time`);
  const [command, ...argv] = [
    ...(options.prefix ?? []),
    options.nodeBinary ?? process.execPath,
    ...(options.nodeArgs ?? []),
    options.script,
    ...(options.args ?? []),
  ];
  const child = spawn(command as string, argv, {
    env: { ...process.env, ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: options.ownProcessGroup ?? false,
  });
  options.signal?.addEventListener('abort', () => child.kill('SIGTERM'), { once: true });
  const logs: LogLine[] = [];
  const stderr: string[] = [];
  const waiters = new Set<{ predicate: (l: LogLine) => boolean; resolve: (l: LogLine) => void }>();
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  child.on('error', () => {
    // spawn failures surface as a missing ready line and the exit code; nothing else to do here.
  });
  createInterface(child.stdout as NodeJS.ReadableStream).on('line', (line) => {
    options.onLine?.(line, 'stdout');
    let parsed: LogLine;
    try {
      parsed = JSON.parse(line) as LogLine;
    } catch {
      parsed = { msg: line, level: 'raw' };
    }
    logs.push(parsed);
    for (const w of waiters) {
      if (w.predicate(parsed)) {
        waiters.delete(w);
        w.resolve(parsed);
      }
    }
  });
  createInterface(child.stderr as NodeJS.ReadableStream).on('line', (line) => {
    options.onLine?.(line, 'stderr');
    stderr.push(line);
  });

  const tail = (n = 8) => {
    const lines = [...logs.slice(-n).map((l) => JSON.stringify(l).slice(0, 300)), ...stderr.slice(-3)];
    return lines.length
      ? `last lines of ${options.script}:\n  ${lines.join('\n  ')}`
      : `${options.script} wrote nothing`;
  };
  const waitForLog = (predicate: (l: LogLine) => boolean, timeoutMs = 10_000, what?: string, error?: Error) => {
    const timeoutError =
      error ?? new Error(`no log line ${what ? `showing ${what} ` : 'matching '}within ${timeoutMs} ms`);
    const seen = logs.find(predicate);
    if (seen) return Promise.resolve(seen);
    return new Promise<LogLine>((resolve, reject) => {
      const waiter = {
        predicate,
        resolve: (l: LogLine) => {
          clearTimeout(timer);
          resolve(l);
        },
      };
      const timer = setTimeout(() => {
        waiters.delete(waiter);
        timeoutError.message += `; ${tail()}`;
        reject(timeoutError);
      }, timeoutMs);
      waiters.add(waiter);
      exited.then((code) => {
        if (!waiters.has(waiter)) return;
        waiters.delete(waiter);
        clearTimeout(timer);
        reject(new Error(`${options.script} exited with ${code} before ${what ?? 'the awaited log line'}; ${tail()}`));
      });
    });
  };

  const readyMsg = options.readyMsg ?? 'ready';
  let ready: LogLine;
  try {
    ready = await waitForLog((l) => l.msg === readyMsg, options.readyTimeoutMs ?? 20_000, readyMsg, readyTimeout);
  } catch (error) {
    child.kill('SIGKILL');
    throw error;
  }
  const stop = async (signal: NodeJS.Signals = 'SIGTERM', timeoutMs = 10_000) => {
    if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
    child.kill(signal);
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    const code = await exited;
    clearTimeout(timer);
    return code;
  };
  return { child, ready, logs, stderr, waitForLog: (p, t, w) => waitForLog(p, t, w), tail, stop, exited };
}
