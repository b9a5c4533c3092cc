import { Resolver } from 'node:dns/promises';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  type ApiServerOptions,
  type KubeObject,
  type LaunchedProcess,
  launchProcess,
  startApiServer,
  type TestApiServer,
} from '@cluster-dns/testkit';
import { type DecodedMessage, type QueryOptions, queryDns } from '@cluster-dns/wire';
import { afterEach } from 'vitest';

export const MAIN = fileURLToPath(new URL('../dist/main.js', import.meta.url));

/** Every listener on loopback and a free port, no lameduck: how tests run the record-builder. */
export const LOOPBACK_ARGS = [
  '--dns-bind-address=127.0.0.1',
  '--healthz-bind-address=127.0.0.1',
  '--dns-port=0',
  '--healthz-port=0',
  '--metrics-port=0',
  '--lameduck=0s',
] as const;

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

export interface RecordBuilderUnderTest {
  api: TestApiServer;
  proc: LaunchedProcess;
  dnsPort: number;
  healthzPort: number;
  metricsPort: number;
  resolver: Resolver;
  query(name: string, type: number, options?: QueryOptions): Promise<DecodedMessage>;
}

/** testkit's API server with `objects`, then the built record-builder against it on free ports. */
export async function startRecordBuilder(
  objects: readonly KubeObject[],
  args: readonly string[] = [],
  options: {
    waitForReady?: boolean;
    beforeStart?: (api: TestApiServer) => void;
    api?: Omit<ApiServerOptions, 'objects'>;
    /** Environment for the process; a PROMETHEUS_PORT here takes the place of the loopback args' --metrics-port. */
    env?: Record<string, string>;
  } = {},
): Promise<RecordBuilderUnderTest> {
  const api = await startApiServer({ ...options.api, objects });
  cleanups.push(() => api.close());
  options.beforeStart?.(api);
  const dir = await mkdtemp(join(tmpdir(), 'rb-test-'));
  const kubeconfig = join(dir, 'kubeconfig');
  await writeFile(kubeconfig, api.kubeconfigYaml());
  const proc = await launchProcess({
    script: MAIN,
    args: [
      `--kubecfg-file=${kubeconfig}`,
      ...LOOPBACK_ARGS.filter((a) => !(options.env?.PROMETHEUS_PORT && a.startsWith('--metrics-port'))),
      ...args,
    ],
    ...(options.env ? { env: options.env } : {}),
    readyMsg: options.waitForReady === false ? 'listening' : 'ready',
  });
  cleanups.push(() => proc.stop('SIGKILL'));
  const ports = proc.ready as unknown as { dnsPort: number; healthzPort: number; metricsPort: number };
  const resolver = new Resolver({ timeout: 5000, tries: 1 });
  resolver.setServers([`127.0.0.1:${ports.dnsPort}`]);
  return {
    api,
    proc,
    ...ports,
    resolver,
    query: (name, type, queryOptions) => queryDns({ host: '127.0.0.1', port: ports.dnsPort }, name, type, queryOptions),
  };
}

export async function resolveCode<T>(promise: Promise<T>): Promise<T | string> {
  try {
    return await promise;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code ?? String(error);
  }
}
