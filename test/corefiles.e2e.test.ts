import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readCorefile } from '@cluster-dns/runtime';
import {
  createNetns,
  hasCommand,
  type LaunchedProcess,
  launchProcess,
  linkNetns,
  type Netns,
  netnsUnavailable,
  runCommand,
  waitFor,
} from '@cluster-dns/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dist } from './support/stack.js';

// The Corefiles the field runs (test/corefiles/: each distribution's shipped default, filled as
// its installer fills it, with what it imports, and users' Corefiles from public issues), each
// read by -validate and started as a CoreDNS Pod's place is taken (record-builder and forwarder
// both given the file, manifests/overlays/coredns's args), answering the cluster's own name and an
// outside name through the forwarder. The files sit where their Pods mount them, under a folder
// of the test's: /etc/… in a Corefile is read from there, /etc/resolv.conf is the namespace's.

const root = fileURLToPath(new URL('..', import.meta.url));
const CORPUS = `${root}/test/corefiles`;
const NODE_IP = '192.0.2.1';
/** The outside name asked: one no Corefile of the corpus answers itself (example.org has zone files). */
const OUTSIDE = JSON.stringify({ 'www.example.net.': [{ type: 1, address: '192.0.2.80' }] });

interface Entry {
  readonly file: string;
  readonly distribution: string;
  readonly mode: 'pod' | 'node-local';
  readonly imports: string | null;
}

const entries = JSON.parse(readFileSync(`${CORPUS}/index.json`, 'utf8')) as Entry[];

/** Corefiles refused on purpose, with the line the refusal must name. */
const REFUSED: Record<string, RegExp> = {
  // OpenShift's own build adds ocp_dnsnameresolver; it is no CoreDNS plugin.
  'openshift-dnsnameresolver.Corefile': /line 18: unknown directive 'ocp_dnsnameresolver'/,
};

/** The corpus's Corefile laid out as its Pod sees it, under `dir`: its imports and files beside it. */
function layOut(entry: Entry, dir: string): string {
  const text = readFileSync(`${CORPUS}/${entry.file}`, 'utf8');
  const base = entry.file.replace(/\.Corefile$/, '');
  const importsAt = /^# imports: (\/\S+)/m.exec(text)?.[1];
  if (importsAt && existsSync(`${CORPUS}/${base}.imports`)) {
    mkdirSync(join(dir, importsAt), { recursive: true });
    cpSync(`${CORPUS}/${base}.imports`, join(dir, importsAt), { recursive: true });
  }
  mkdirSync(join(dir, 'etc/coredns'), { recursive: true });
  if (existsSync(`${CORPUS}/${base}.files`))
    cpSync(`${CORPUS}/${base}.files`, join(dir, 'etc/coredns'), { recursive: true });
  // k3s's NodeHosts: the node's name and address, as k3s writes it.
  writeFileSync(join(dir, 'etc/coredns/NodeHosts'), `${NODE_IP} node-1\n`);
  // Node-cache reads the filled-in copy at /etc/Corefile: its relative imports are from /etc.
  const at = join(dir, entry.mode === 'pod' ? 'etc/coredns/Corefile' : 'etc/Corefile.base');
  mkdirSync(dirname(at), { recursive: true });
  // Every /etc/… but the namespace's resolv.conf is the test's folder.
  writeFileSync(at, text.replace(/\/etc\/(?!resolv\.conf)/g, `${dir}/etc/`));
  return at;
}

const podEntries = entries.filter((e) => e.mode === 'pod');

describe('the field’s Corefiles, read by -validate', () => {
  it.each(entries.map((e) => [e.file, e] as const))('%s', async (file, entry) => {
    const dir = mkdtempSync(join(tmpdir(), 'corefile-'));
    const path = layOut(entry, dir);
    const result =
      entry.mode === 'pod'
        ? await runCommand(process.execPath, [dist('forwarder'), `--corefile=${path}`, '-validate'])
        : await runCommand(
            process.execPath,
            [
              dist('forwarder', 'node-cache-main.js'),
              `-basecorefile=${path}`,
              '-localip=169.254.20.10,10.96.0.10',
              '-upstreamsvc=kube-dns',
              `-conf=${join(dir, 'etc/Corefile')}`,
              '-validate',
            ],
            { env: { KUBE_DNS_SERVICE_HOST: '10.96.0.10' } },
          );
    const refused = REFUSED[file];
    if (refused) {
      expect(result.status, result.stdout).toBe(2);
      expect(result.stderr).toMatch(refused);
      return;
    }
    expect(result.status, result.stderr).toBe(0);
    // A plan per server block, each plugin line naming where it came from.
    const blocks = result.stdout.split('\n').filter((l) => l.startsWith('server block '));
    expect(blocks.length).toBeGreaterThan(0);
    // Each block lists its plugins, each with the line it came from.
    for (const block of result.stdout.split(/^server block /m).slice(1))
      expect(
        block
          .split('\n')
          .slice(1)
          .filter((l) => /^ {2}[a-z0-9_]+ +\S+:\d+/.test(l)).length,
      ).toBeGreaterThan(0);
  });
});

const unavailable =
  netnsUnavailable() ??
  (hasCommand('dig') ? undefined : 'dig is not installed') ??
  (hasCommand('nft') ? undefined : 'nft is not installed (apt-get install -y nftables)');
if (unavailable) console.warn(`skipping the field's Corefiles started: ${unavailable}`);

describe.skipIf(unavailable)('the field’s Corefiles, started in a CoreDNS Pod’s place', () => {
  let pod: Netns;
  let node: Netns;
  let kubeconfig: string;
  const procs: LaunchedProcess[] = [];

  beforeAll(async () => {
    pod = createNetns();
    node = createNetns();
    linkNetns(pod, '192.0.2.10/24', node, `${NODE_IP}/24`);
    // Upstreams named by address (a stub domain's 172.16.0.1, Azure's 168.63.129.16) are the
    // node's too: every DNS packet the Pod sends out is the node's upstream's (DNAT, replies un-NATed).
    await pod.run('ip', ['route', 'add', 'default', 'via', NODE_IP]);
    await node.run('nft', ['add table ip corpus']);
    await node.run('nft', ['add chain ip corpus pre { type nat hook prerouting priority -100 ; }']);
    await node.run('nft', [`add rule ip corpus pre udp dport 53 dnat to ${NODE_IP}`]);
    await node.run('nft', [`add rule ip corpus pre tcp dport 53 dnat to ${NODE_IP}`]);
    pod.writeResolvConf(`nameserver ${NODE_IP}\n`);
    const dir = mkdtempSync(join(tmpdir(), 'corefiles-'));
    kubeconfig = join(dir, 'kubeconfig');
    procs.push(
      await launchProcess({
        prefix: pod.prefix,
        script: dist('testkit', 'cli.js'),
        args: [`--manifests=${root}/manifests/demo`, `--kubeconfig=${kubeconfig}`],
      }),
    );
    procs.push(
      await launchProcess({
        prefix: node.prefix,
        script: dist('testkit', 'upstream-cli.js'),
        args: [`--host=${NODE_IP}`, '--port=53', `--records=${OUTSIDE}`],
      }),
    );
  }, 60_000);

  afterAll(async () => {
    for (const p of procs.reverse()) await p.stop('SIGKILL');
    pod?.close();
    node?.close();
  });

  it.each(podEntries.filter((e) => !REFUSED[e.file]).map((e) => [e.file, e] as const))(
    '%s answers the cluster’s name and an outside name',
    async (_file, entry) => {
      const dir = mkdtempSync(join(tmpdir(), 'corefile-'));
      const path = layOut(entry, dir);
      const blocks = readCorefile(readFileSync(path, 'utf8'), { source: path, mode: 'pod' });
      const port = (blocks.find((b) => b.kubernetes) ?? blocks[0])?.keys[0]?.port ?? 53;
      const started: LaunchedProcess[] = [];
      const cluster = blocks.some((b) => b.kubernetes);
      try {
        // A Corefile without kubernetes (a user's plain resolver) has nothing for the record-builder.
        if (cluster)
          started.push(
            await launchProcess({
              prefix: pod.prefix,
              script: dist('record-builder'),
              args: [`--corefile=${path}`, '--dns-bind-address=127.0.0.1', '--healthz-port=0', '--metrics-port=0'],
              env: { KUBECONFIG: kubeconfig },
            }),
          );
        started.push(await launchProcess({ prefix: pod.prefix, script: dist('forwarder'), args: [`-conf`, path] }));
        const dig = async (...args: string[]) =>
          (await pod.run('dig', ['+tries=1', '+time=3', '@127.0.0.1', '-p', String(port), ...args])).trim();
        if (cluster)
          await waitFor(async () => (await dig('+short', 'kubernetes.default.svc.cluster.local')) === '10.96.0.1', {
            what: `kubernetes.default through ${entry.file}'s forwarder`,
            seen: () => started.map((p) => p.tail(8)).join('\n'),
          });
        // A k8s_external zone is the record-builder's too: its apex answers through the forwarder.
        for (const b of blocks.filter((x) => x.k8sExternal))
          for (const zone of b.k8sExternal?.zones ?? b.keys.map((k) => k.zone))
            expect(await dig('+short', 'SOA', zone)).toMatch(
              new RegExp(`^ns1\\.dns\\.${zone.replaceAll('.', '\\.')} `),
            );
        const outside = blocks.find((b) => b.keys.some((k) => k.zone === '.'))?.forward?.to;
        // Upstreams the namespace can reach: resolv.conf's, or an IPv4 address of the node's.
        if (
          outside &&
          (!Array.isArray(outside) || outside.every((s) => /^(\d+\.){3}\d+$/.test(s.host) && s.port === 53))
        )
          expect(await dig('+short', 'www.example.net')).toBe('192.0.2.80');
      } finally {
        for (const p of started.reverse()) await p.stop('SIGKILL');
      }
    },
    60_000,
  );
});
