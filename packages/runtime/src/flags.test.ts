import { describe, expect, it } from 'vitest';
import { parseGoDurationMs } from './duration.js';
import { FlagError, UnknownFlagError } from './errors.js';
import { flag, formatFlagHelp, parseFlags } from './flags.js';
import { parseHostPort } from './host-port.js';

const table = {
  port: flag.int('port', 53, { aliases: ['p'], min: 0, max: 65535 }),
  'keep-in-foreground': flag.bool('accepted', { aliases: ['k'] }),
  server: flag.list('servers', (raw) => raw),
  'initial-sync-timeout': flag.duration('wait', 60_000),
  v: flag.int('verbosity', 0),
  pods: flag.enumOf('pod records', ['insecure', 'verified', 'disabled'], 'insecure'),
};

describe('parseFlags', () => {
  it.each([
    [['--port=10053'], { port: 10053 }],
    [['--port', '10053'], { port: 10053 }],
    [['-p', '5353'], { port: 5353 }],
    [['-p5353'], { port: 5353 }],
    [['-k'], { 'keep-in-foreground': true }],
    [['--keep-in-foreground=false'], { 'keep-in-foreground': false }],
    [['-v=2'], { v: 2 }],
    [['--v=4'], { v: 4 }],
    [
      ['--server=/cluster.local/127.0.0.1#10053', '--server=8.8.8.8'],
      { server: ['/cluster.local/127.0.0.1#10053', '8.8.8.8'] },
    ],
    [['--initial-sync-timeout=1m30s'], { 'initial-sync-timeout': 90_000 }],
    [['--pods=verified'], { pods: 'verified' }],
    // `pnpm demo -- --port=5300` passes the separator on.
    [['--', '--port=5300'], { port: 5300 }],
  ])('parses %j', (argv, expected) => {
    expect(parseFlags(table, argv).values).toMatchObject(expected);
  });

  it('keeps defaults for flags not given', () => {
    expect(parseFlags(table, []).values).toEqual({
      port: 53,
      'keep-in-foreground': false,
      server: [],
      'initial-sync-timeout': 60_000,
      v: 0,
      pods: 'insecure',
    });
  });

  it.each([
    [['--bogus'], UnknownFlagError, 'unknown flag: --bogus'],
    [['--bogus=1'], UnknownFlagError, 'unknown flag: --bogus'],
    [['positional'], UnknownFlagError, 'unknown flag: positional'],
    [['--port=abc'], FlagError, 'invalid value "abc" for --port: expected an integer from 0 to 65535'],
    [['--port=70000'], FlagError, '--port'],
    [['--port'], FlagError, 'expected a int after --port'],
    [['--pods=maybe'], FlagError, 'one of insecure, verified, disabled'],
    [['--initial-sync-timeout=soon'], FlagError, 'a Go duration'],
  ])('rejects %j naming the flag', (argv, type, message) => {
    expect(() => parseFlags(table, argv)).toThrow(type);
    expect(() => parseFlags(table, argv)).toThrow(message);
  });

  it('lists every flag in --help', () => {
    const help = formatFlagHelp('x', 'does x', table);
    for (const name of Object.keys(table)) expect(help).toContain(`--${name}`);
    expect(help).toContain('-p, --port=<int>');
  });
});

describe('parseGoDurationMs', () => {
  it.each([
    ['60s', 60_000],
    ['1m30s', 90_000],
    ['250ms', 250],
    ['1.5h', 5_400_000],
    ['0', 0],
  ])('%s is %d ms', (text, ms) => expect(parseGoDurationMs(text)).toBe(ms));

  it.each(['', '10', 's', '5 s', '1d'])('rejects %j', (text) =>
    expect(() => parseGoDurationMs(text)).toThrow(FlagError),
  );
});

describe('parseHostPort', () => {
  it.each([
    ['10.0.0.10', { host: '10.0.0.10', port: 53 }],
    ['10.0.0.10:5353', { host: '10.0.0.10', port: 5353 }],
    ['10.0.0.10#5353', { host: '10.0.0.10', port: 5353 }],
    ['[fd00::10]:5353', { host: 'fd00::10', port: 5353 }],
    ['fd00::10', { host: 'fd00::10', port: 53 }],
  ])('%s', (text, expected) => expect(parseHostPort(text, 53)).toEqual(expected));

  it.each(['ns.example.org', '10.0.0.10:0', '10.0.0.10:99999', '10.0.0'])('rejects %s', (text) =>
    expect(() => parseHostPort(text, 53, '--server')).toThrow('--server'),
  );
});
