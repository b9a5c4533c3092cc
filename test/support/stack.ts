import dgram from 'node:dgram';
import { readFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  fixtures,
  freePort,
  type LaunchedProcess,
  launchProcess,
  localRecordBuilderArgs,
  startApiServer,
  startTestUpstream,
  type TestApiServer,
  type TestUpstream,
  type TestUpstreamOptions,
} from '@cluster-dns/testkit';
import { loadAllYaml } from '@kubernetes/client-node';

// The whole stack as the tests of the whole start it: testkit's API server, the record-builder
// and the forwarder as their own processes on loopback, and an outside upstream.

/** How much the fuzz and soak suites do: 1 in CI (`pnpm test`), more with `pnpm fuzz` / `pnpm soak`. */
export const SCALE = Number(process.env.CLUSTER_DNS_FUZZ_SCALE ?? 1);

const root = fileURLToPath(new URL('../..', import.meta.url));
/** A built entry of a package: its main.js, or another (node-cache-main.js, cli.js). */
export const dist = (pkg: string, file = 'main.js') => `${root}/packages/${pkg}/dist/${file}`;

export interface Stack {
  api: TestApiServer;
  upstream: TestUpstream;
  rb: LaunchedProcess;
  fw: LaunchedProcess;
  rbPort: number;
  fwPort: number;
  close(): Promise<void>;
}

/** baseCluster's headless `pg` Service's slice: `endpoints` pods pg-0… at 10.244.1.1…. */
export const pgSlice = (endpoints = 40) =>
  fixtures.endpointSlice(
    'data',
    'pg',
    'pg-1',
    Array.from({ length: endpoints }, (_, i) => ({ addresses: [`10.244.1.${i + 1}`], hostname: `pg-${i}` })),
    { ports: [{ name: 'pg', port: 5432 }] },
  );

export const baseCluster = () => [
  fixtures.service('default', 'kubernetes', { clusterIPs: ['10.96.0.1'], ports: [{ name: 'https', port: 443 }] }),
  fixtures.service('shop', 'web', { clusterIPs: ['10.96.1.10', 'fd00::10'], ports: [{ name: 'http', port: 80 }] }),
  fixtures.service('data', 'pg', { headless: true, ports: [{ name: 'pg', port: 5432 }] }),
  pgSlice(),
  fixtures.service('shop', 'pay', { externalName: 'pay.example.org' }),
];

/** The record-builder and the forwarder as the manifest runs them (--notify, --no-negcache), on loopback. */
export async function startStack(
  options: {
    rbArgs?: string[];
    /** Node's own arguments for each server (the soak gives them the manifest's heap flags). */
    rbNodeArgs?: string[];
    fwNodeArgs?: string[];
    /** The forwarder's node binary (node22Binary() for --workers). */
    fwNodeBinary?: string;
    fwArgs?: string[];
    /** A command to run the forwarder under (`prlimit --nofile=…`). */
    fwPrefix?: string[];
    objects?: ReturnType<typeof baseCluster>;
    /** Where the record-builder sends NOTIFY: the forwarder (default), another port (a relay), or nowhere. */
    notify?: 'direct' | number | 'none';
    /** What the outside upstream serves (default: pay.example.org and www.example.org). */
    upstreamRecords?: TestUpstreamOptions['records'];
    /** A clusterset zone: served by the record-builder (--multicluster-zone) and routed to it. */
    clustersetZone?: string;
    /** Another Pod's API server (a second replica): then `objects` is ignored, and close leaves it. */
    api?: TestApiServer;
  } = {},
): Promise<Stack> {
  const api = options.api ?? (await startApiServer({ objects: options.objects ?? baseCluster() }));
  const upstream = await startTestUpstream({
    records: options.upstreamRecords ?? {
      'pay.example.org.': [{ type: 1, address: '192.0.2.7', ttl: 300 }],
      'www.example.org.': [{ type: 1, address: '192.0.2.8', ttl: 300 }],
    },
  });
  const notify = options.notify ?? 'direct';
  const kubeconfig = join(await mkdtemp(join(tmpdir(), 'fuzz-')), 'kubeconfig');
  await api.writeKubeconfig(kubeconfig);
  const fwPort = await freePort();
  const rb = await launchProcess({
    script: dist('record-builder'),
    nodeArgs: options.rbNodeArgs,
    args: localRecordBuilderArgs(kubeconfig, [
      ...(notify === 'none' ? [] : [`--notify=127.0.0.1:${notify === 'direct' ? fwPort : notify}`]),
      ...(options.clustersetZone ? [`--multicluster-zone=${options.clustersetZone}`] : []),
      ...(options.rbArgs ?? []),
    ]),
  });
  const rbPort = rb.ready.dnsPort as number;
  const fw = await launchProcess({
    script: dist('forwarder'),
    nodeArgs: options.fwNodeArgs,
    ...(options.fwNodeBinary ? { nodeBinary: options.fwNodeBinary } : {}),
    prefix: options.fwPrefix,
    args: [
      '-k',
      '--cache-size=1000',
      '--no-negcache',
      '--no-resolv',
      '--listen-address=127.0.0.1',
      `--port=${fwPort}`,
      `--server=/cluster.local/127.0.0.1#${rbPort}`,
      `--server=/in-addr.arpa/127.0.0.1#${rbPort}`,
      `--server=/ip6.arpa/127.0.0.1#${rbPort}`,
      ...(options.clustersetZone ? [`--server=/${options.clustersetZone}/127.0.0.1#${rbPort}`] : []),
      `--server=${upstream.address}`,
      '--lameduck=0s',
      '--metrics-port=0',
      '--metrics-address=127.0.0.1',
      ...(options.fwArgs ?? []),
    ],
  });
  return {
    api,
    upstream,
    rb,
    fw,
    rbPort,
    fwPort,
    close: async () => {
      await fw.stop('SIGKILL');
      await rb.stop('SIGKILL');
      await upstream.close();
      if (!options.api) await api.close();
    },
  };
}

interface ManifestContainer {
  name: string;
  resources?: { limits?: { memory?: string } };
  env?: Array<{ name: string; value?: string }>;
}

/** A container of the Deployment in manifests/base/deployment.yaml, as the manifest writes it. */
function manifestContainer(container: string): ManifestContainer | undefined {
  const docs = loadAllYaml(readFileSync(`${root}/manifests/base/deployment.yaml`, 'utf8')) as Array<{
    kind: string;
    spec?: { template?: { spec?: { containers?: ManifestContainer[] } } };
  }>;
  return docs.find((d) => d.kind === 'Deployment')?.spec?.template?.spec?.containers?.find((c) => c.name === container);
}

/** A container's memory limit in manifests/base/deployment.yaml, in MiB: what the OOM killer enforces. */
export function manifestMemoryLimitMiB(container: string): number {
  const match = /^(\d+)Mi$/.exec(manifestContainer(container)?.resources?.limits?.memory ?? '');
  if (!match) throw new Error(`manifests/base/deployment.yaml: no memory limit in Mi for the ${container} container`);
  return Number(match[1]);
}

/** The NODE_OPTIONS of a container in manifests/base/deployment.yaml, as node arguments (its heap flags). */
export function manifestNodeArgs(container: string): string[] {
  const value = manifestContainer(container)?.env?.find((e) => e.name === 'NODE_OPTIONS')?.value;
  if (!value) throw new Error(`manifests/base/deployment.yaml: no NODE_OPTIONS for the ${container} container`);
  return value.split(/\s+/).filter(Boolean);
}

export function rssMiB(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('VmRSS:'));
  return Number(line?.split(/\s+/)[1] ?? 0) / 1024;
}

/**
 * Wakes its waiters on every event (a reply, a close) and resolves each once its condition holds,
 * or with false once its own deadline passes: event-driven, so a slow machine only waits longer.
 */
function eventWaiters() {
  const waiting = new Set<() => void>();
  return {
    wake: () => {
      for (const w of [...waiting]) w();
    },
    until: (check: () => boolean, timeoutMs: number) =>
      new Promise<boolean>((resolve) => {
        if (check()) return resolve(true);
        const finish = (result: boolean) => {
          clearTimeout(timer);
          waiting.delete(onEvent);
          resolve(result);
        };
        const onEvent = () => {
          if (check()) finish(true);
        };
        const timer = setTimeout(() => finish(check()), timeoutMs);
        waiting.add(onEvent);
      }),
  };
}

/** One UDP socket that sends raw messages and collects replies by ID. */
export async function udpClient(port: number, localAddress = '127.0.0.1') {
  const socket = dgram.createSocket('udp4');
  await new Promise<void>((r) => socket.bind(0, localAddress, () => r()));
  const replies: Buffer[] = [];
  const events = eventWaiters();
  socket.on('message', (m) => {
    replies.push(m);
    events.wake();
  });
  const send = (m: Buffer) => socket.send(m, port, '127.0.0.1');
  return {
    replies,
    send,
    /** Sends `message` and resolves with the first reply carrying `id`, or undefined after `timeoutMs`. */
    async ask(message: Buffer, id: number, timeoutMs = 10_000): Promise<Buffer | undefined> {
      const from = replies.length;
      const found = () => replies.slice(from).find((r) => r.length >= 2 && r.readUInt16BE(0) === id);
      send(message);
      await events.until(() => found() !== undefined, timeoutMs);
      return found();
    },
    /** Whether any reply with this ID has come so far. */
    hasReply: (id: number) => replies.some((r) => r.length >= 2 && r.readUInt16BE(0) === id),
    close: () => new Promise<void>((r) => socket.close(() => r())),
  };
}

/** A TCP connection that sends length-prefixed messages and collects the replies. */
export async function tcpClient(port: number) {
  const socket = net.connect({ host: '127.0.0.1', port });
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  let buffered = Buffer.alloc(0);
  const replies: Buffer[] = [];
  let closed = false;
  const events = eventWaiters();
  const wake = events.wake;
  socket.on('data', (chunk) => {
    buffered = Buffer.concat([buffered, chunk]);
    while (buffered.length >= 2 && buffered.length >= 2 + buffered.readUInt16BE(0)) {
      replies.push(buffered.subarray(2, 2 + buffered.readUInt16BE(0)));
      buffered = buffered.subarray(2 + buffered.readUInt16BE(0));
    }
    wake();
  });
  socket.on('close', () => {
    closed = true;
    wake();
  });
  socket.on('error', () => {});
  const frame = (m: Buffer) => {
    const f = Buffer.alloc(m.length + 2);
    f.writeUInt16BE(m.length, 0);
    m.copy(f, 2);
    return f;
  };
  return {
    socket,
    replies,
    get closed() {
      return closed;
    },
    write: (bytes: Buffer) => socket.write(bytes),
    send: (m: Buffer) => socket.write(frame(m)),
    frame,
    /** Until `n` replies have come, or the connection closed; false on timeout. */
    async waitFor(n: number, timeoutMs = 10_000): Promise<boolean> {
      await events.until(() => replies.length >= n || closed, timeoutMs);
      return replies.length >= n;
    },
    closedWithin: (timeoutMs: number): Promise<boolean> => events.until(() => closed, timeoutMs),
    end: () => socket.end(),
    destroy: () => socket.destroy(),
  };
}
