import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger, parseFlags } from '@cluster-dns/runtime';
import { waitFor } from '@cluster-dns/testkit';
import { Counter, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { forwarderFlags, toForwarderOptions } from '../src/options.js';
import type { Forwarder } from '../src/server/forwarder.js';
import { createWorkerPool } from '../src/workers/worker-pool.js';

const metric = (text: string, name: string) => Number(new RegExp(`^${name} (\\S+)`, 'm').exec(text)?.[1] ?? Number.NaN);

describe('worker pool (--workers), with stand-in workers', () => {
  it('starts a worker that dies again with the cache it left, sums every worker at /metrics (the dead one’s counts kept), and drains them all on shutdown', async () => {
    process.env.CRASHING_WORKER_MARKER = join(mkdtempSync(join(tmpdir(), 'pool-')), 'crashed');
    const lines: Array<Record<string, unknown>> = [];
    const leaderRegistry = new Registry();
    new Counter({ name: 'clusterdns_forwarder_cache_hits_total', help: 'h', registers: [leaderRegistry] }).inc();
    const options = toForwarderOptions(
      parseFlags(forwarderFlags, ['--listen-address=127.0.0.1', '--port=0', '--cache-size=100']).values,
    );
    const pool = createWorkerPool({
      options,
      program: 'forwarder',
      count: 3,
      metrics: { address: '127.0.0.1', port: 0, flags: '--metrics-port' },
      reusePort: false,
      // Worker 0 in this thread: a stand-in that has counted one hit, as the others.
      leader: () =>
        ({
          start: async () => ({ port: 5353, addresses: ['127.0.0.1'], metricsPort: 0 }),
          shutdown: async () => {},
          metricsJson: () => leaderRegistry.getMetricsAsJSON(),
          handle: () => undefined,
        }) as unknown as Forwarder,
      log: createLogger({ component: 'test', write: (line) => lines.push(JSON.parse(line)) }),
      workerScript: new URL('./fixtures/crashing-worker.mjs', import.meta.url),
    });
    const started = await pool.start();
    // The first worker's port, which the others were started on.
    expect(started.port).toBe(5353);
    const scrape = async () => (await fetch(`http://127.0.0.1:${started.metricsPort}/metrics`)).text();
    // The first scrape: worker 1 answers it, then dies.
    expect(metric(await scrape(), 'clusterdns_forwarder_cache_hits_total')).toBe(3);
    await waitFor(async () => metric(await scrape(), 'clusterdns_forwarder_worker_restarts_total') === 1, {
      what: 'worker 1 started again after it exited',
      seen: () => JSON.stringify(lines.slice(-3)),
    });
    await waitFor(async () => metric(await scrape(), 'clusterdns_forwarder_workers') === 3, {
      what: 'all three workers serving again',
    });
    const text = await scrape();
    // One count from each worker, summed, and the dead worker's last count kept: the sum never falls.
    expect(metric(text, 'clusterdns_forwarder_cache_hits_total')).toBe(4);
    // The process's own series once.
    expect(text.match(/^process_resident_memory_bytes /gm)?.length).toBe(1);
    // The cache outlived the worker that kept an answer in it: started again, it finds the answer.
    expect(metric(text, 'coredns_cache_hits_total\\{server="dns://127.0.0.1:5353",type="denial"\\}')).toBe(1);
    expect(lines.some((l) => l.msg === 'worker exited; starting it again' && l.worker === 1 && l.code === 3)).toBe(
      true,
    );
    await pool.shutdown();
    await expect(fetch(`http://127.0.0.1:${started.metricsPort}/metrics`)).rejects.toThrow();
  });
});
