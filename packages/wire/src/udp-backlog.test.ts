import { spawn } from 'node:child_process';
import dgram from 'node:dgram';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { type DnsListener, listenDns } from './listener.js';
import { buildQueryMessage, encodeMessage } from './message.js';

// Shedding is about what the kernel holds while this process is busy, so the queries come from
// another process: this one is made busy on purpose, the fault under test.

const open: DnsListener[] = [];
const sockets: dgram.Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.close();
  for (const l of open.splice(0)) await l.close({ deadlineMs: 100 });
});

/** Another process that sends `count` queries to `port` as fast as it can, then creates `marker`. */
function sendFromChild(port: number, count: number, marker: string) {
  const query = encodeMessage(buildQueryMessage(1, 'flood.example.org', 1)).toString('hex');
  const script = `
    const s = require('node:dgram').createSocket('udp4');
    const q = Buffer.from('${query}', 'hex');
    let sent = 0;
    for (let i = 0; i < ${count}; i++) s.send(q, ${port}, '127.0.0.1', () => {
      if (++sent === ${count}) { require('node:fs').writeFileSync(${JSON.stringify(marker)}, ''); s.close(); }
    });`;
  return spawn(process.execPath, ['-e', script], { stdio: 'ignore' });
}

/** Holds this process's event loop (the fault): until `marker` exists, then `extraMs` more. */
function stallUntil(marker: string, extraMs: number) {
  const deadline = Date.now() + 20_000;
  while (!existsSync(marker) && Date.now() < deadline) {
    // Busy on purpose: nothing else runs in this process meanwhile, as in a long GC pause.
  }
  const until = Date.now() + extraMs;
  while (Date.now() < until) {
    // The stall goes on past the shed bound.
  }
}

async function until(check: () => boolean, what: string, seen: () => unknown) {
  const deadline = Date.now() + 20_000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`never saw ${what}; saw ${JSON.stringify(seen())}`);
    await new Promise((r) => setImmediate(r));
  }
}

/** One query from a socket of this process, answered: the listener serves fresh queries again. */
function askFresh(port: number): Promise<void> {
  const s = dgram.createSocket('udp4');
  sockets.push(s);
  return new Promise((resolve) => {
    s.on('message', () => resolve());
    s.send(encodeMessage(buildQueryMessage(2, 'fresh.example.org', 1)), port, '127.0.0.1');
  });
}

/** A listener shedding past `shedAfterMs`, counting the queries its handler took; each costs `costMs` of busy work. */
async function counting(costMs: number, shedAfterMs = 100) {
  const seen = { handled: 0 };
  const l = await listenDns({
    host: '127.0.0.1',
    port: 0,
    shedAfterMs,
    handler: (message) => {
      seen.handled++;
      const until = performance.now() + costMs;
      while (performance.now() < until) {
        // Busy on purpose: a slow handler.
      }
      return message;
    },
  });
  open.push(l);
  return { l, seen };
}

/** How long this process takes to read `count` queries a stall left queued, shedding never reached. */
async function drainTimeOf(count: number): Promise<number> {
  const { l, seen } = await counting(0, 600_000);
  const marker = join(mkdtempSync(join(tmpdir(), 'shed-')), 'sent');
  const child = sendFromChild(l.port, count, marker);
  stallUntil(marker, 50);
  const start = performance.now();
  await until(
    () => seen.handled >= count,
    'the calibration backlog read',
    () => seen.handled,
  );
  child.kill();
  return performance.now() - start;
}

describe('UDP shedding (udp-backlog.ts)', () => {
  it('answers the backlog an event-loop stall leaves when it drains within the bound', async () => {
    // How fast this host reads such a backlog decides what "within the bound" is: measured first,
    // with shedding out of reach, so the bound below is a wide margin over it however busy the
    // host is, and the stall still outlasts the bound.
    const drainMs = await drainTimeOf(2_000);
    const boundMs = Math.max(100, Math.ceil(drainMs * 5));
    const { l, seen } = await counting(0, boundMs);
    const marker = join(mkdtempSync(join(tmpdir(), 'shed-')), 'sent');
    const child = sendFromChild(l.port, 2_000, marker);
    stallUntil(marker, boundMs * 2);
    await until(
      () => seen.handled + l.udpShed() >= 2_000,
      'every queued query read',
      () => [seen.handled, l.udpShed()],
    );
    // Two thousand queries twice the bound old, read in a fifth of it: worth answering, none dropped.
    expect([seen.handled, l.udpShed()], `drained in ${drainMs.toFixed(1)} ms, bound ${boundMs} ms`).toEqual([2_000, 0]);
    await askFresh(l.port);
    child.kill();
  });

  it('drops the backlog of a socket that has been behind for longer than the bound, and serves again once it empties', async () => {
    // A slow handler: a thousand queries a second at most, far under what the child sends.
    const { l, seen } = await counting(1);
    const marker = join(mkdtempSync(join(tmpdir(), 'shed-')), 'sent');
    const child = sendFromChild(l.port, 3_000, marker);
    await until(
      () => seen.handled + l.udpShed() >= 3_000,
      'every query read',
      () => [seen.handled, l.udpShed()],
    );
    // Without shedding the handler would take all 3,000 (three seconds of work, each answer later
    // than the last); with it, about the bound's worth before the rest is dropped.
    expect(l.udpShed(), `handled ${seen.handled}`).toBeGreaterThan(1_000);
    expect(seen.handled).toBeLessThan(2_000);
    const before = seen.handled;
    await askFresh(l.port);
    expect(seen.handled).toBe(before + 1);
    child.kill();
  });
});
