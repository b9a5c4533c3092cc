import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  createNetns,
  type LaunchedProcess,
  launchProcess,
  linkNetns,
  type Netns,
  netnsUnavailable,
} from '@cluster-dns/testkit';
import { loadAllYaml } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('..', import.meta.url));
const FORWARDER = `${root}/packages/forwarder/dist/main.js`;
const UPSTREAM = `${root}/packages/testkit/dist/upstream-cli.js`;
const QUERY = `${root}/packages/testkit/dist/query-cli.js`;
const unavailable = netnsUnavailable();
if (unavailable)
  console.warn(
    `skipping the network-namespace tests: ${unavailable}; run as root with iproute2 (apt-get install -y iproute2)`,
  );

/** The dnsmasq container's args, read from the manifest operators apply: never a hand copy. */
function manifestForwarderArgs(): string[] {
  const docs = loadAllYaml(readFileSync(`${root}/manifests/base/deployment.yaml`, 'utf8')) as Array<{
    kind: string;
    spec: { template: { spec: { containers: Array<{ name: string; args: string[] }> } } };
  }>;
  const deployment = docs.find((d) => d.kind === 'Deployment');
  const args = deployment?.spec.template.spec.containers.find((c) => c.name === 'dnsmasq')?.args;
  if (!args) throw new Error('manifests/base/deployment.yaml has no dnsmasq container args');
  return args;
}

describe.skipIf(unavailable)('the forwarder as the manifest deploys it, in a network namespace', () => {
  let pod: Netns;
  let node: Netns;
  const procs: LaunchedProcess[] = [];

  beforeAll(async () => {
    // The Pod and the node's resolver on two hosts, as in a cluster: 192.0.2.53 is not on our host.
    pod = createNetns();
    node = createNetns();
    linkNetns(pod, '192.0.2.2/24', node, '192.0.2.53/24');
    procs.push(
      await launchProcess({
        prefix: node.prefix,
        script: UPSTREAM,
        args: ['--host=192.0.2.53', '--port=53', '--records={"example.org.":[{"type":1,"address":"192.0.2.80"}]}'],
      }),
    );
    // dnsPolicy: Default: the node's resolver is in the Pod's resolv.conf.
    pod.writeResolvConf('nameserver 192.0.2.53\n');
  });

  afterAll(async () => {
    for (const p of procs.reverse()) await p.stop('SIGKILL');
    pod?.close();
    node?.close();
  });

  it('listens on 0.0.0.0:53 with --dns-loop-detect and still forwards to the node resolver on port 53', async () => {
    const args = manifestForwarderArgs();
    expect(args).toContain('--dns-loop-detect');
    expect(args.some((a) => a.startsWith('--listen-address') || a.startsWith('--port'))).toBe(false);
    const fw = await launchProcess({ prefix: pod.prefix, script: FORWARDER, args });
    procs.push(fw);
    expect(fw.ready.port).toBe(53);
    const reply = JSON.parse(await pod.run(process.execPath, [QUERY, '127.0.0.1', '53', 'example.org', 'A']));
    expect(reply.flags.rcode).toBe(0);
    expect(reply.answers.map((a: { address: string }) => a.address)).toEqual(['192.0.2.80']);
    // Also through the Pod's own address, as kube-proxy delivers queries.
    const viaPodIp = JSON.parse(await pod.run(process.execPath, [QUERY, '192.0.2.2', '53', 'example.org', 'A']));
    expect(viaPodIp.answers.map((a: { address: string }) => a.address)).toEqual(['192.0.2.80']);
    expect(fw.logs.some((l) => String(l.msg).startsWith('forwarding loop detected'))).toBe(false);
  });
});
