import { describe, expect, it } from 'vitest';
import { FlagError } from './errors.js';
import { flag } from './flags.js';
import { type ProcessHooks, runMain } from './lifecycle.js';

function fakeHooks(argv: string[]) {
  const handlers = new Map<string, () => void>();
  const out = { exits: [] as number[], stdout: '', stderr: '' };
  const exitWaiters: Array<{ n: number; resolve: () => void }> = [];
  const hooks: ProcessHooks = {
    argv,
    exit: (code) => {
      out.exits.push(code);
      for (const w of exitWaiters) if (out.exits.length >= w.n) w.resolve();
    },
    onSignal: (signal, handler) => handlers.set(signal, handler),
    onFatal: () => {},
    stdout: (t) => {
      out.stdout += t;
    },
    stderr: (t) => {
      out.stderr += t;
    },
  };
  /** Resolves once `exit` has been called `n` times. */
  const exited = (n: number) =>
    new Promise<void>((resolve) => (out.exits.length >= n ? resolve() : exitWaiters.push({ n, resolve })));
  return { hooks, out, exited, signal: (s: string) => handlers.get(s)?.() };
}

const flags = { port: flag.int('port', 53, { min: 0, max: 65535 }) };
/** One turn of the event loop: every promise already settled has run its callbacks. */
const turn = () => new Promise((r) => setImmediate(r));

describe('runMain', () => {
  it('logs a failed shutdown with the error itself, and exits 1', async () => {
    const f = fakeHooks([]);
    await runMain(
      {
        program: 'p',
        summary: '',
        flags,
        start: async () => ({ shutdown: () => Promise.reject(new Error('disk gone')) }),
      },
      f.hooks,
    );
    f.signal('SIGTERM');
    await f.exited(1);
    const line = f.out.stdout.split('\n').find((l) => l.includes('shutdown failed'));
    expect(JSON.parse(line ?? '{}').err).toEqual({ name: 'Error', message: 'disk gone' });
    expect(f.out.exits).toEqual([1]);
  });

  it('exits 2 with one line naming a bad flag', async () => {
    const f = fakeHooks(['--port=x']);
    await runMain({ program: 'p', summary: '', flags, start: async () => ({ shutdown: async () => {} }) }, f.hooks);
    expect(f.out.exits).toEqual([2]);
    expect(f.out.stderr).toBe(
      'p: invalid value "x" for --port: expected an integer from 0 to 65535 (see --help for --port)\n',
    );
  });

  it('exits 2 when start rejects the configuration, 1 when start fails otherwise', async () => {
    const bad = fakeHooks([]);
    await runMain(
      { program: 'p', summary: '', flags, start: async () => Promise.reject(new FlagError('--x', 'y', 'z')) },
      bad.hooks,
    );
    expect(bad.out.exits).toEqual([2]);
    const broken = fakeHooks([]);
    await runMain(
      { program: 'p', summary: '', flags, start: async () => Promise.reject(new Error('EADDRINUSE')) },
      broken.hooks,
    );
    expect(broken.out.exits).toEqual([1]);
    expect(broken.out.stderr).toContain('EADDRINUSE');
  });

  it('drains on SIGTERM and exits 0; a second signal exits 1', async () => {
    const f = fakeHooks([]);
    let release = () => {};
    const drained = new Promise<void>((r) => {
      release = r;
    });
    await runMain({ program: 'p', summary: '', flags, start: async () => ({ shutdown: () => drained }) }, f.hooks);
    f.signal('SIGTERM');
    await turn();
    expect(f.out.exits).toEqual([]);
    f.signal('SIGINT');
    expect(f.out.exits).toEqual([1]);
    release();
    await f.exited(2);
    expect(f.out.exits).toEqual([1, 0]);
  });

  it('acts on a SIGTERM that arrives while starting, once started', async () => {
    const f = fakeHooks([]);
    let shutdowns = 0;
    let finishStart = () => {};
    const started = new Promise<void>((r) => {
      finishStart = r;
    });
    const running = runMain(
      {
        program: 'p',
        summary: '',
        flags,
        start: async () => {
          await started;
          return { shutdown: async () => void shutdowns++ };
        },
      },
      f.hooks,
    );
    await turn();
    f.signal('SIGTERM');
    expect(f.out.exits).toEqual([]);
    finishStart();
    await running;
    await f.exited(1);
    expect(shutdowns).toBe(1);
    expect(f.out.exits).toEqual([0]);
  });

  it('takes one Ctrl-C delivered twice (to the group, and passed on by pnpm) as one signal', async () => {
    const f = fakeHooks([]);
    let release = () => {};
    const drained = new Promise<void>((r) => {
      release = r;
    });
    await runMain({ program: 'p', summary: '', flags, start: async () => ({ shutdown: () => drained }) }, f.hooks);
    f.signal('SIGINT');
    f.signal('SIGINT');
    await turn();
    expect(f.out.exits).toEqual([]);
    release();
    await f.exited(1);
    expect(f.out.exits).toEqual([0]);
  });

  it('aborts a start that listens for a signal while it waits, and exits 0', async () => {
    const f = fakeHooks([]);
    const running = runMain(
      {
        program: 'p',
        summary: '',
        flags,
        start: (_values, { signal }) =>
          new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(signal.reason))),
      },
      f.hooks,
    );
    await turn();
    f.signal('SIGTERM');
    await running;
    expect(f.out.exits).toEqual([0]);
    expect(f.out.stdout).toContain('stopped while starting');
  });
});
