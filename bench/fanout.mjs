// Bench case 9: push to node caches. One record-builder (pinned to the server core) told of
// `caches` node caches (--notify-node-cache), simulated in one process on the load core
// (node-cache-sim.mjs: each takes a NOTIFY's names when in step, else fetches the IXFR, then
// answers), while Services are
// created at `rate` a second. Reports the record-builder's CPU and RSS, the NOTIFYs and IXFRs it
// served, and how long each change took to reach every cache (p50, p99, max over change × cache).
import { mkdtemp } from 'node:fs/promises';
import { join } from 'node:path';
import { fixtures, freePort, launchProcess, startApiServer } from '@cluster-dns/testkit';
import { cpuSeconds, LOAD_CORE, pinPrefix, ROOT, recordBuilderArgs, round, SCRATCH, SERVER_CORE } from './lib.mjs';
import { steadyMemory } from './scale.mjs';

export async function runFanout({
  row,
  caches = 1000,
  rate = 100,
  seconds = 10,
  services = 1000,
  rbNodeArgs = [],
  dir = ROOT,
  name = 'cluster-dns',
}) {
  const objects = [fixtures.service('default', 'kubernetes', { clusterIPs: ['10.96.0.1'] })];
  for (let i = 0; i < services; i++)
    objects.push(fixtures.service('fan', `base-${i}`, { clusterIPs: [`10.97.${i >> 8}.${i & 255}`] }));
  const api = await startApiServer({ objects });
  const kubeconfig = join(await mkdtemp(join(SCRATCH, 'fanout-')), 'kubeconfig');
  await api.writeKubeconfig(kubeconfig);
  const rbPort = await freePort();
  const sim = await launchProcess({
    script: join(ROOT, 'bench/node-cache-sim.mjs'),
    // Each hands back the position its last reply gave, as the forwarder does (an older build
    // ignores it), and fetches at its SOA check every 5 s, as the forwarder does.
    args: [JSON.stringify({ count: caches, rbPort, positions: true, refetchMs: 5000, zone: 'cluster.local.' })],
    prefix: pinPrefix(LOAD_CORE),
  });
  const targets = sim.ready.ports.map((p) => `--notify-node-cache=127.0.0.1:${p}`);
  const rb = await launchProcess({
    script: join(dir, 'packages/record-builder/dist/main.js'),
    nodeArgs: rbNodeArgs,
    // The later --dns-port wins over recordBuilderArgs' 0: the simulated caches fetch from it.
    // Each simulated cache fetches up to three zones at once over TCP, all from 127.0.0.1: the
    // connection caps sized for the fleet, as the Pod forwarder's relay would bring them.
    args: recordBuilderArgs(kubeconfig, [
      `--dns-port=${rbPort}`,
      '--max-tcp-connections=5000',
      '--max-tcp-connections-per-client=5000',
      ...targets,
    ]),
    prefix: pinPrefix(SERVER_CORE),
    readyTimeoutMs: 120_000,
  });
  const caseName = `9. push to ${caches.toLocaleString('en-US')} node caches, ${rate} changes/s`;
  try {
    await sim.waitForLog((l) => l.msg === 'primed', 120_000, 'every simulated cache holding the zone');
    const idle = await steadyMemory(rb.child.pid, undefined, 3);
    const cpu0 = cpuSeconds(rb.child.pid);
    const simCpu0 = cpuSeconds(sim.child.pid);
    const t0 = performance.now();
    let made = 0;
    // `rate` creations a second, each named for the moment it was made.
    while (performance.now() - t0 < seconds * 1000) {
      const due = Math.floor(((performance.now() - t0) / 1000) * rate);
      for (; made < due; made++)
        api.apply(
          fixtures.service('fan', `fan-${made}-${Date.now()}`, { clusterIPs: [`10.98.${made >> 8}.${made & 255}`] }),
        );
      await new Promise((r) => setTimeout(r, 5));
    }
    const busyS = (performance.now() - t0) / 1000;
    const cpu = cpuSeconds(rb.child.pid) - cpu0;
    const simCpu = cpuSeconds(sim.child.pid) - simCpu0;
    const during = await steadyMemory(rb.child.pid, undefined, 2);
    // Let the last NOTIFYs land (an interval and a fetch), then collect.
    await new Promise((r) => setTimeout(r, 1000));
    sim.child.kill('SIGTERM');
    const result = await sim.waitForLog((l) => l.msg === 'result', 30_000, 'the simulated caches’ result');
    const expected = made * caches;
    row(caseName, name, {
      changes: made,
      deliveries: result.deliveries,
      missing: expected - result.deliveries,
      propagationP50Ms: result.p50,
      propagationP99Ms: result.p99,
      propagationMaxMs: result.max,
      fetches: result.fetches,
      // NOTIFYs whose names were taken in step, with no fetch (an older build sends none).
      notifiesApplied: result.applied,
      notifiesOutOfStep: result.gaps,
      notifiesIncomplete: result.incomplete,
      fetchesPerCachePerS: round(result.fetches / caches / busyS, 2),
      fullTransfers: result.full,
      failedFetches: result.failed,
      cpuPercent: round((cpu / busyS) * 100),
      // The simulated caches' own core: near 100 means the delays above are partly theirs.
      simulatorCpuPercent: round((simCpu / busyS) * 100),
      idleRssMiB: idle.steadyRssMiB,
      rssMiB: during.steadyRssMiB,
    });
  } finally {
    sim.child.kill('SIGKILL');
    await rb.stop('SIGTERM', 10_000);
    await api.close();
  }
}
