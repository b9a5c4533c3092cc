// Bench case 14: node caches through a rollout of the record-builder. `caches` simulated node
// caches (node-cache-sim.mjs: handing back their position and fetching each zone every 5 s, as the
// forwarder's SOA check does) are pushed by one record-builder while Services are created at `rate`
// a second; a new record-builder starts (the rollout's new Pod: it lists after the caches' copies
// were made), and once it is ready the old one is sent SIGTERM and goes on for its lameduck (5 s)
// before every cache's connection moves to the new one (SIGUSR2) and the old one is killed; the changes go on. That
// `replacements` times, one Pod after another, as a Deployment of that many replicas rolls. Counts
// what the caches' fetches after the first move cost: whole-zone replies (each a flush of that cache's zone), fetches, and the
// octets they read (a whole-zone reply is read only as far as its first message: its cost is the
// flush, and what the node then asks again). Each build in turn: ours, then each --baseline
// checkout (whose replicas count serials of their own), on a fresh API server of the same objects.
import { mkdtemp } from 'node:fs/promises';
import { join } from 'node:path';
import { fixtures, freePort, launchProcess, startApiServer } from '@cluster-dns/testkit';
import { baselineName } from './hits.mjs';
import { LOAD_CORE, pinPrefix, ROOT, recordBuilderArgs, round, SCRATCH, SERVER_CORE } from './lib.mjs';

/** The record-builder's default --lameduck: how long an old Pod serves after the new one is ready. */
const LAMEDUCK_MS = 5000;

async function oneBuild({ dir, name, caches, services, rate, seconds, replacements, row, caseName }) {
  const objects = [fixtures.service('default', 'kubernetes', { clusterIPs: ['10.96.0.1'] })];
  for (let i = 0; i < services; i++)
    objects.push(
      fixtures.service('roll', `base-${i}`, {
        clusterIPs: [`10.97.${i >> 8}.${i & 255}`],
        ports: [{ name: 'http', port: 80 }],
      }),
    );
  const api = await startApiServer({ objects });
  const kubeconfig = join(await mkdtemp(join(SCRATCH, 'rollout-')), 'kubeconfig');
  await api.writeKubeconfig(kubeconfig);
  const ports = [];
  for (let i = 0; i <= replacements; i++) ports.push(await freePort());
  const sim = await launchProcess({
    script: join(ROOT, 'bench/node-cache-sim.mjs'),
    args: [JSON.stringify({ count: caches, rbPorts: ports, positions: true, refetchMs: 5000, zone: 'cluster.local.' })],
    prefix: pinPrefix(LOAD_CORE),
  });
  const targets = sim.ready.ports.map((p) => `--notify-node-cache=127.0.0.1:${p}`);
  const replica = (port) =>
    launchProcess({
      script: join(dir, 'packages/record-builder/dist/main.js'),
      args: recordBuilderArgs(kubeconfig, [
        `--dns-port=${port}`,
        '--max-tcp-connections=5000',
        '--max-tcp-connections-per-client=5000',
        // Its lameduck outlasts the bench's wait before the move: SIGTERM starts it, as the
        // kubelet does once the new Pod is ready.
        `--lameduck=${LAMEDUCK_MS / 1000 + 2}s`,
        ...targets,
      ]),
      prefix: pinPrefix(SERVER_CORE),
      readyTimeoutMs: 120_000,
    });
  let current = await replica(ports[0]);
  let next;
  let made = 0;
  const change = () =>
    api.apply(
      fixtures.service('roll', `fan-${made++}-${Date.now()}`, { clusterIPs: [`10.98.${made >> 8}.${made & 255}`] }),
    );
  /** `rate` creations a second for `ms`. */
  const churn = async (ms) => {
    const t0 = performance.now();
    let due = 0;
    while (performance.now() - t0 < ms) {
      for (; due < Math.floor(((performance.now() - t0) / 1000) * rate); due++) change();
      await new Promise((r) => setTimeout(r, 5));
    }
  };
  try {
    await sim.waitForLog((l) => l.msg === 'primed', 120_000, 'every simulated cache holding the zone');
    const share = (seconds * 1000) / (replacements + 1);
    await churn(share);
    for (let i = 1; i <= replacements; i++) {
      // The new Pod lists while the old one goes on pushing; then the old one goes.
      next = await replica(ports[i]);
      current.child.kill('SIGTERM');
      await churn(LAMEDUCK_MS);
      sim.child.kill('SIGUSR2');
      await sim.waitForLog((l) => l.msg === 'moved' && l.port === ports[i], 10_000, 'the caches moved');
      await current.stop('SIGKILL');
      current = next;
      next = undefined;
      await churn(share);
    }
    // Every change's fetch has landed well before this when the simulator keeps up.
    await new Promise((r) => setTimeout(r, 3000));
    sim.child.kill('SIGTERM');
    const result = await sim.waitForLog((l) => l.msg === 'result', 30_000, 'the simulated caches’ result');
    const moved = result.moved ?? { fetches: 0, full: 0, failed: 0, bytes: 0 };
    row(caseName, name, {
      changes: made,
      fetchesAfterMove: moved.fetches,
      fullAfterMove: moved.full,
      cachesFlushedPct: round((moved.full / caches) * 100),
      failedAfterMove: moved.failed,
      bytesPerCacheAfterMove: Math.round(moved.bytes / caches),
      missing: made * caches - result.deliveries,
      propagationP50Ms: result.p50,
      propagationP99Ms: result.p99,
      bytesPerCachePerReplacement: Math.round(moved.bytes / caches / replacements),
    });
  } finally {
    if (sim.child.exitCode === null) sim.child.kill('SIGKILL');
    await current.stop('SIGKILL');
    await next?.stop('SIGKILL');
    await api.close();
  }
}

export async function runRollout({
  row,
  caches = 300,
  services = 5000,
  rate = 20,
  seconds = 10,
  replacements = 1,
  baselines = [],
}) {
  const caseName = `14. rollout under ${caches.toLocaleString('en-US')} node caches, ${services.toLocaleString('en-US')} Services, ${rate} changes/s, ${replacements} ${replacements === 1 ? 'Pod' : 'Pods'} replaced`;
  const run = { caches, services, rate, seconds, replacements, row, caseName };
  await oneBuild({ dir: ROOT, name: 'cluster-dns', ...run });
  for (const dir of baselines) await oneBuild({ dir, name: baselineName(dir), ...run });
}
