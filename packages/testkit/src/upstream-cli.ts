#!/usr/bin/env node
/**
 * testkit's DNS upstream as a process, for tests that need it in another network namespace:
 *   node packages/testkit/dist/upstream-cli.js --host=192.0.2.53 --port=53 --records='{"example.org.":[{"type":1,"address":"192.0.2.80"}]}'
 * or --records-file=<path> with the same JSON, for more records than a command line holds.
 * Logs a `ready` line with the port, and the queries it gets at debug (--v=4).
 */
import { readFileSync } from 'node:fs';
import { FlagError, flag, nodeProcessHooks, runMain } from '@cluster-dns/runtime';
import { startTestUpstream, type TestUpstreamOptions } from './test-upstream.js';

type Records = NonNullable<TestUpstreamOptions['records']>;

const flags = {
  host: flag.string('address to listen on', '127.0.0.1'),
  port: flag.int('port to listen on; 0 picks a free one', 0, { min: 0, max: 65535 }),
  records: flag.custom('records by owner name, as JSON (TestUpstreamOptions.records)', {}, (raw, name) =>
    parseRecords(raw, name, 'a JSON object of name → [record, …]'),
  ),
  'records-file': flag.custom("a file holding --records' JSON, for more than a command line holds", {}, (raw, name) => {
    let text: string;
    try {
      text = readFileSync(raw, 'utf8');
    } catch (err) {
      throw new FlagError(name, raw, `a readable file (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
    }
    return parseRecords(text, name, 'a file holding a JSON object of name → [record, …]', raw);
  }),
  delay: flag.duration('answer every query after this long (an upstream that far away)', 0),
  v: flag.int('log verbosity; 4 or more logs each query', 0, { min: 0 }),
};

function parseRecords(text: string, name: string, expected: string, shown = text): Records {
  try {
    return JSON.parse(text) as Records;
  } catch {
    throw new FlagError(name, shown, expected);
  }
}

await runMain(
  {
    program: 'testkit-upstream',
    summary: 'A small authoritative DNS server for tests.',
    flags,
    start: async (values, { log }) => {
      const upstream = await startTestUpstream({
        host: values.host,
        port: values.port,
        records: { ...values.records, ...values['records-file'] },
        ...(values.delay > 0 ? { delayMs: values.delay } : {}),
      });
      log.info('ready', { host: upstream.host, port: upstream.port });
      return { shutdown: () => upstream.close() };
    },
  },
  nodeProcessHooks(),
);
