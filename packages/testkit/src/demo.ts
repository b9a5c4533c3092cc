#!/usr/bin/env node
/**
 * The README's start command: the demo cluster on testkit's API server, then the record-builder,
 * forwarder and sidecar as separate processes on loopback, their logs prefixed with their names.
 */
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { nodeProcessHooks, runMain } from '@cluster-dns/runtime';
import { startApiServer } from './api-server.js';
import { checkDemoValues } from './demo-checks.js';
import { demoFlags, repoRoot } from './demo-options.js';
import { freePort } from './free-port.js';
import { loadManifestFolder } from './manifests.js';
import { type LaunchedProcess, launchProcess } from './process-launcher.js';

function prefixed(name: string) {
  return (line: string) => process.stdout.write(`${name.padEnd(15)}| ${line}\n`);
}

await runMain(
  {
    program: 'cluster-dns-demo',
    summary: 'Starts the whole cluster-dns stack on loopback, on the embedded demo cluster or a real one.',
    flags: demoFlags,
    shutdownDeadlineMs: 20_000,
    start: async (values, { log, signal }) => {
      // The flags as typed, checked here: a child would name its own flag (--port for --dns-port).
      await checkDemoValues(values);
      const children: Array<{ name: string; process: LaunchedProcess }> = [];
      // Children run in their own process groups: if this launcher dies, take them along.
      process.on('exit', () => {
        for (const c of children) c.process.child.kill('SIGKILL');
      });
      watchParent(() => process.kill(process.pid, 'SIGTERM'));
      let kubeconfig = values.kubeconfig;
      let api: Awaited<ReturnType<typeof startApiServer>> | undefined;
      let tempDir: string | undefined;
      if (!kubeconfig) {
        api = await startApiServer({ objects: await loadManifestFolder(values.manifests) });
        tempDir = await mkdtemp(join(tmpdir(), 'cluster-dns-demo-'));
        kubeconfig = join(tempDir, 'kubeconfig');
        await api.writeKubeconfig(kubeconfig);
        log.info('demo cluster serving', { url: api.url, kubeconfig, manifests: values.manifests });
      }
      const domain = values.domain;
      const launch = async (name: string, args: string[]) => {
        const script = join(repoRoot, 'packages', name, 'dist/main.js');
        if (!existsSync(script)) throw new Error(`${script} is missing: run the build first (pnpm build)`);
        const child = await launchProcess({
          script,
          args,
          onLine: prefixed(name),
          readyTimeoutMs: 90_000,
          ownProcessGroup: true,
          signal,
        });
        children.push({ name, process: child });
        return child.ready as Record<string, unknown>;
      };
      const stopAll = async () => {
        for (const child of children.reverse()) {
          const code = await child.process.stop('SIGTERM', 15_000);
          log.info('stopped', { process: child.name, exitCode: code });
        }
        await api?.close();
        if (tempDir) await rm(tempDir, { recursive: true, force: true });
      };
      try {
        return await startStack();
      } catch (error) {
        await stopAll();
        throw error;
      }

      async function startStack() {
        signal.throwIfAborted();
        // The record-builder NOTIFYs the forwarder, which starts after it: its port is fixed first.
        const port = values['dns-port'] || (await freePort());
        const rb = await launch('record-builder', [
          `--kubecfg-file=${kubeconfig}`,
          `--domain=${domain}`,
          '--dns-bind-address=127.0.0.1',
          '--healthz-bind-address=127.0.0.1',
          `--dns-port=${values['record-builder-port']}`,
          `--healthz-port=${values['healthz-port']}`,
          `--metrics-port=${values['metrics-port']}`,
          `--lameduck=${values.lameduck}`,
          `--notify=127.0.0.1:${port}`,
        ]);
        const rbPort = rb.dnsPort as number;
        const fw = await launch('forwarder', [
          // kube-dns's dnsmasq arguments, as the manifest gives them.
          '-k',
          '--cache-size=1000',
          '--no-negcache',
          '--dns-loop-detect',
          '--log-facility=-',
          '--listen-address=127.0.0.1',
          `--port=${port}`,
          `--server=/${domain}/127.0.0.1#${rbPort}`,
          `--server=/in-addr.arpa/127.0.0.1#${rbPort}`,
          `--server=/ip6.arpa/127.0.0.1#${rbPort}`,
          `--lameduck=${values.lameduck}`,
          '--metrics-address=127.0.0.1',
          `--metrics-port=${values['forwarder-metrics-port']}`,
          ...(values.upstream ? ['--no-resolv', `--server=${values.upstream}`] : []),
        ]);
        const sc = await launch('sidecar', [
          '--v=2',
          `--probe=kubedns,127.0.0.1:${rbPort},kubernetes.default.svc.${domain},${values['probe-interval']},SRV`,
          `--probe=dnsmasq,127.0.0.1:${port},kubernetes.default.svc.${domain},${values['probe-interval']},SRV`,
          `--dnsmasq-port=${port}`,
          `--dnsmasq-poll-interval-ms=${values['poll-interval-ms']}`,
          '--prometheus-addr=127.0.0.1',
          `--prometheus-port=${values['sidecar-port']}`,
        ]);
        const sidecarPort = sc.port as number;
        const z = domain.replace(/\.$/, '');
        process.stdout.write(
          [
            '',
            `cluster-dns is up. DNS on 127.0.0.1:${port} (forwarder); record-builder on 127.0.0.1:${rbPort}. Try:`,
            `  dig @127.0.0.1 -p ${port} kubernetes.default.svc.${z}`,
            `  dig @127.0.0.1 -p ${port} SRV _https._tcp.frontend.shop.svc.${z}`,
            `  dig @127.0.0.1 -p ${port} postgres.data.svc.${z}        # headless`,
            `  dig @127.0.0.1 -p ${port} -x 10.96.10.10                  # PTR`,
            `  dig @127.0.0.1 -p ${port} payments.shop.svc.${z}        # ExternalName`,
            `  dig @127.0.0.1 -p ${port} AAAA api.shop.svc.${z}        # dual-stack`,
            `  dig @127.0.0.1 -p ${port} example.org                     # forwarded upstream`,
            `  dig @127.0.0.1 -p ${port} +short chaos txt hits.bind      # cache statistics`,
            `  curl -s 127.0.0.1:${sidecarPort}/healthcheck/kubedns; curl -s 127.0.0.1:${sidecarPort}/metrics | grep kubedns_`,
            `  curl -s 127.0.0.1:${rb.healthzPort}/readiness; curl -s 127.0.0.1:${rb.healthzPort}/cache`,
            `  curl -s 127.0.0.1:${fw.metricsPort}/metrics | grep clusterdns_forwarder_   # NOTIFYs, IXFRs, invalidations`,
            `No dig? node -e "const r=new (require('dns').promises.Resolver)();r.setServers(['127.0.0.1:${port}']);r.resolve4('kubernetes.default.svc.${z}').then(console.log)"`,
            ...(api ? [`Change the demo cluster through its API: ${api.url} (kubeconfig ${kubeconfig})`] : []),
            'Ctrl-C stops everything.',
            '',
          ].join('\n'),
        );
        log.info('ready', {
          pid: process.pid,
          dnsPort: port,
          recordBuilderPort: rbPort,
          healthzPort: rb.healthzPort,
          metricsPort: rb.metricsPort,
          forwarderMetricsPort: fw.metricsPort,
          sidecarPort,
          apiUrl: api?.url,
          kubeconfig,
        });
        return { shutdown: stopAll };
      }
    },
  },
  nodeProcessHooks(),
);

/**
 * Calls `onOrphaned` once when a process that started this one is gone: a process manager's
 * SIGTERM to the README's command (`npx … demo`) stops npx and pnpm, but the shell between pnpm
 * and this process survives them and passes nothing on. So the chain of ancestors (up to four,
 * below init) is read at start from /proc, and any of them exiting or being reparented counts.
 */
function watchParent(onOrphaned: () => void): void {
  const parentOf = (pid: number): number | undefined => {
    try {
      // /proc/<pid>/stat: "pid (comm) state ppid …"; comm may hold spaces and parentheses.
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    } catch {
      return undefined;
    }
  };
  const chain: Array<[number, number | undefined]> = [];
  for (let pid = process.ppid, depth = 0; pid > 1 && depth < 4; depth++) {
    const parent = parentOf(pid);
    chain.push([pid, parent]);
    if (parent === undefined) break;
    pid = parent;
  }
  const timer = setInterval(() => {
    if (process.ppid === chain[0]?.[0] && chain.every(([pid, parent]) => parentOf(pid) === parent)) return;
    clearInterval(timer);
    onOrphaned();
  }, 500);
  timer.unref();
}
