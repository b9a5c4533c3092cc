#!/usr/bin/env node
/**
 * The README's start command: the demo cluster on testkit's API server, then the record-builder,
 * forwarder and sidecar as separate processes on loopback, their logs prefixed with their names.
 */
import { existsSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { flag, nodeProcessHooks, runMain } from '@cluster-dns/runtime';
import { startApiServer } from './api-server.js';
import { loadManifestFolder } from './manifests.js';
import { type LaunchedProcess, launchProcess } from './process-launcher.js';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');

const flags = {
  kubeconfig: flag.string('run against this cluster instead of the embedded demo cluster', ''),
  manifests: flag.string('folder of YAML manifests for the demo cluster', join(repoRoot, 'manifests/demo')),
  'dns-port': flag.int('public DNS port of the forwarder', 1053, { min: 1, max: 65535 }),
  'record-builder-port': flag.int('DNS port of the record-builder', 10053, { min: 1, max: 65535 }),
  'healthz-port': flag.int('record-builder readiness port', 8081, { min: 1, max: 65535 }),
  'metrics-port': flag.int('record-builder metrics port', 10055, { min: 1, max: 65535 }),
  'sidecar-port': flag.int('sidecar HTTP port', 10054, { min: 1, max: 65535 }),
  domain: flag.string('cluster domain', 'cluster.local'),
  upstream: flag.string('upstream nameserver for names outside the cluster (default: /etc/resolv.conf)', ''),
};

function prefixed(name: string) {
  return (line: string) => process.stdout.write(`${name.padEnd(15)}| ${line}\n`);
}

await runMain(
  {
    program: 'cluster-dns-demo',
    summary: 'Starts the whole cluster-dns stack on loopback, on the embedded demo cluster or a real one.',
    flags,
    shutdownDeadlineMs: 20_000,
    start: async (values, { log }) => {
      const children: Array<{ name: string; process: LaunchedProcess }> = [];
      let kubeconfig = values.kubeconfig;
      let api: Awaited<ReturnType<typeof startApiServer>> | undefined;
      if (!kubeconfig) {
        api = await startApiServer({ objects: await loadManifestFolder(values.manifests) });
        kubeconfig = join(await mkdtemp(join(tmpdir(), 'cluster-dns-demo-')), 'kubeconfig');
        await api.writeKubeconfig(kubeconfig);
        log.info('demo cluster serving', { url: api.url, kubeconfig, manifests: values.manifests });
      }
      const domain = values.domain;
      const specs = [
        {
          name: 'record-builder',
          args: [
            `--kubecfg-file=${kubeconfig}`,
            `--domain=${domain}`,
            '--dns-bind-address=127.0.0.1',
            `--dns-port=${values['record-builder-port']}`,
            `--healthz-port=${values['healthz-port']}`,
            `--metrics-port=${values['metrics-port']}`,
          ],
        },
        {
          name: 'forwarder',
          args: [
            '-k',
            '--cache-size=1000',
            '--log-facility=-',
            '--listen-address=127.0.0.1',
            `--port=${values['dns-port']}`,
            `--server=/${domain}/127.0.0.1#${values['record-builder-port']}`,
            `--server=/in-addr.arpa/127.0.0.1#${values['record-builder-port']}`,
            `--server=/ip6.arpa/127.0.0.1#${values['record-builder-port']}`,
            ...(values.upstream ? ['--no-resolv', `--server=${values.upstream}`] : []),
          ],
        },
        {
          name: 'sidecar',
          args: [
            '--v=2',
            `--probe=kubedns,127.0.0.1:${values['record-builder-port']},kubernetes.default.svc.${domain},5,SRV`,
            `--probe=dnsmasq,127.0.0.1:${values['dns-port']},kubernetes.default.svc.${domain},5,SRV`,
            `--dnsmasq-port=${values['dns-port']}`,
            '--prometheus-addr=127.0.0.1',
            `--prometheus-port=${values['sidecar-port']}`,
          ],
        },
      ];
      for (const spec of specs) {
        const script = join(repoRoot, 'packages', spec.name, 'dist/main.js');
        if (!existsSync(script)) {
          log.warn('not built yet, skipped', { process: spec.name, script });
          continue;
        }
        const child = await launchProcess({
          script,
          args: spec.args,
          onLine: prefixed(spec.name),
          readyTimeoutMs: 90_000,
        });
        children.push({ name: spec.name, process: child });
      }
      const port = children.some((c) => c.name === 'forwarder') ? values['dns-port'] : values['record-builder-port'];
      const z = domain;
      process.stdout.write(
        [
          '',
          `cluster-dns is up. DNS on 127.0.0.1:${port}; try:`,
          `  dig @127.0.0.1 -p ${port} kubernetes.default.svc.${z}`,
          `  dig @127.0.0.1 -p ${port} SRV _https._tcp.frontend.shop.svc.${z}`,
          `  dig @127.0.0.1 -p ${port} postgres.data.svc.${z}          # headless`,
          `  dig @127.0.0.1 -p ${port} -x 10.96.10.10                     # PTR`,
          `  dig @127.0.0.1 -p ${port} payments.shop.svc.${z}          # ExternalName`,
          `  dig @127.0.0.1 -p ${port} AAAA api.shop.svc.${z}          # dual-stack`,
          `  dig @127.0.0.1 -p ${port} example.org                       # forwarded upstream`,
          `  curl -s 127.0.0.1:${values['sidecar-port']}/healthcheck/kubedns ; curl -s 127.0.0.1:${values['sidecar-port']}/metrics`,
          "  (no dig? node -e \"require('dns').promises.setServers(['127.0.0.1:" + port + '\']);..." works too)',
          'Ctrl-C stops everything.',
          '',
        ].join('\n'),
      );
      log.info('ready', { dnsPort: port, processes: children.map((c) => c.name) });
      return {
        shutdown: async () => {
          for (const child of children.reverse()) {
            const code = await child.process.stop('SIGTERM', 15_000);
            log.info('stopped', { process: child.name, exitCode: code });
          }
          await api?.close();
        },
      };
    },
  },
  nodeProcessHooks(),
);
