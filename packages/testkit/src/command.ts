import { spawn } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';

/**
 * Whether `name` is an executable on the PATH: looked up in the file system, never by running it,
 * so a test file can decide what to skip before anything starts.
 */
export function hasCommand(name: string): boolean {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (!dir) continue;
    try {
      accessSync(join(dir, name), constants.X_OK);
      return true;
    } catch {
      // Not in this folder of the PATH: try the next.
    }
  }
  return false;
}

export interface CommandResult {
  /** The exit code, or null when a signal (the timeout's SIGKILL) ended it. */
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

export interface RunOptions {
  /** Written to its stdin, which is then closed. */
  input?: string;
  /** SIGKILL after this long (default 30 s); the result then says so in `stderr`. */
  timeoutMs?: number;
  env?: Record<string, string>;
  cwd?: string;
}

/**
 * Runs a command to its end without blocking this process: a client (dig, kubectl, a musl
 * program) may be asking a server that lives in this very process (testkit's API server, a test
 * upstream), which a synchronous exec would starve.
 */
export function runCommand(command: string, args: readonly string[], options: RunOptions = {}): Promise<CommandResult> {
  return new Promise((resolve) => {
    const child = spawn(command, args, {
      env: options.env ? { ...process.env, ...options.env } : process.env,
      cwd: options.cwd,
      stdio: [options.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, options.timeoutMs ?? 30_000);
    child.stdout?.on('data', (chunk: Buffer) => out.push(chunk));
    child.stderr?.on('data', (chunk: Buffer) => err.push(chunk));
    if (options.input !== undefined) child.stdin?.end(options.input);
    const finish = (status: number | null, extra = '') => {
      clearTimeout(timer);
      const stderr = Buffer.concat(err).toString('utf8') + extra;
      resolve({ status, stdout: Buffer.concat(out).toString('utf8'), stderr });
    };
    child.on('error', (error) => finish(null, `\n${command}: ${error.message}`));
    child.on('close', (code) =>
      finish(code, timedOut ? `\n${command} killed after ${options.timeoutMs ?? 30_000} ms` : ''),
    );
  });
}

/** Runs a command and returns its stdout; a non-zero exit throws with the command and its stderr. */
export async function runChecked(command: string, args: readonly string[], options: RunOptions = {}): Promise<string> {
  const result = await runCommand(command, args, options);
  if (result.status !== 0)
    throw new Error(`${command} ${args.join(' ')} exited with ${result.status}: ${result.stderr.trim().slice(-500)}`);
  return result.stdout;
}
