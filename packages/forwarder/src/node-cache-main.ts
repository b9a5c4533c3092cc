#!/usr/bin/env node
import { spawn } from 'node:child_process';
import { nodeProcessHooks, runMain } from '@cluster-dns/runtime';
import { startNodeCache } from './node-local/node-cache.js';
import { nodeCacheFlags } from './node-local/node-cache-options.js';
import type { CommandRunner } from './node-local/node-plumbing.js';
import { validateNodeCacheCorefile } from './node-local/setup.js';

/** ip, iptables and nft, run to their end; a missing binary is exit 127, as a shell says it. */
const run: CommandRunner = (command, args, input) =>
  new Promise((resolve) => {
    const child = spawn(command, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', (error) => {
      clearTimeout(timer);
      resolve({ code: 127, stdout, stderr: `${command}: ${error.message}` });
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code: code ?? 1, stdout, stderr });
    });
    child.stdin.on('error', () => undefined);
    child.stdin.end(input ?? '');
  });

await runMain(
  {
    program: 'node-cache',
    summary:
      'The forwarder in node-local mode: a drop-in for NodeLocal DNSCache’s node-cache. It takes node-cache’s flags and the node-local-dns ConfigMap’s Corefile, puts the local IPs on a link of the node, and keeps NOTRACK and ACCEPT rules for them (iptables or native nft).',
    flags: nodeCacheFlags,
    shutdownDeadlineMs: 30_000,
    command: (values, io) =>
      values.validate ? validateNodeCacheCorefile(values, { ...io, env: process.env }) : undefined,
    start: async (values, { log }) => {
      log.info('starting', { values });
      const cache = await startNodeCache(values, { log, run, env: process.env });
      return { shutdown: () => cache.shutdown() };
    },
  },
  nodeProcessHooks(),
);
