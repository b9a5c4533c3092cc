import { readFileSync, writeFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  createNetns,
  hasCommand,
  type LaunchedProcess,
  launchProcess,
  linkNetns,
  type Netns,
  netnsUnavailable,
  node22Binary,
  waitFor,
} from '@cluster-dns/testkit';
import { loadAllYaml } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dist } from './support/stack.js';

// Node-local mode in network namespaces made here: a "kube-dns Pod" (testkit's API server, the
// record-builder, the Pod's forwarder), a "node" running the node cache on 169.254.20.10 and the
// kube-dns IP, and a "pod" behind a veth whose resolv.conf names 169.254.20.10. The node's link
// is a bridge: this kernel has no `dummy` (see ../shared/reference/node-local.md); production
// keeps the default, dummy.

const root = fileURLToPath(new URL('..', import.meta.url));
const NODE_CACHE = dist('forwarder', 'node-cache-main.js');
const LOCAL_IP = '169.254.20.10';
const KUBE_DNS_IP = '10.96.0.10';
const unavailable = netnsUnavailable();
if (unavailable) console.warn(`skipping the node-local tests: ${unavailable}`);

const STEADY = `${root}/test/support/steady-queries.mjs`;
const node22 = node22Binary();
if ('unavailable' in node22) console.warn(`skipping the node-local handover test: ${node22.unavailable}`);
const firewalls = (
  [
    ['nft', hasCommand('nft')],
    ['iptables-legacy', hasCommand('iptables-legacy')],
    ['iptables', hasCommand('iptables')],
  ] as const
).filter(([name, present]) => {
  if (!present)
    console.warn(`skipping node-local mode with ${name}: not installed (apt-get install -y nftables iptables)`);
  return present;
});

/** The Corefile of manifests/node-local's ConfigMap: what operators apply. */
function manifestCorefile(): string {
  const docs = loadAllYaml(readFileSync(`${root}/manifests/node-local/configmap.yaml`, 'utf8')) as Array<{
    data: { Corefile: string };
  }>;
  return (docs[0] as { data: { Corefile: string } }).data.Corefile;
}

/** Our rules as the node shows them: nft's table, or iptables-save's lines with our comment. */
async function rulesOf(node: Netns, firewall: string): Promise<string[]> {
  if (firewall === 'nft') {
    const listed = await node.run('nft', ['list', 'ruleset']);
    let chain = '';
    const out: string[] = [];
    for (const line of listed.split('\n').map((l) => l.trim())) {
      if (line.startsWith('chain ')) chain = line;
      else if (/ (notrack|accept)$/.test(line)) out.push(`${chain} ${line}`);
    }
    return out;
  }
  const saved = await node.run(`${firewall}-save`, []);
  return saved.split('\n').filter((l) => l.includes('cluster-dns node-local'));
}

/** The value of an unlabelled series in Prometheus text. */
const metricValue = (text: string, name: string) =>
  Number(
    text
      .split('\n')
      .find((l) => l.startsWith(`${name} `))
      ?.split(' ')[1] ?? Number.NaN,
  );

/** An HTTP GET from inside a namespace, with Node's fetch. */
const httpGet = (ns: Netns, url: string) =>
  ns.run(process.execPath, [
    '-e',
    `fetch(${JSON.stringify(url)}).then((r) => r.text()).then((t) => process.stdout.write(t))`,
  ]);

describe.skipIf(unavailable || firewalls.length === 0 || !hasCommand('dig'))(
  'node-local mode, in network namespaces',
  () => {
    let dnsPod: Netns;
    const procs: LaunchedProcess[] = [];
    let dir: string;
    let podForwarderMetrics = 0;
    let rbMetrics = 0;
    /**
     * The kube-dns Pod's forwarder: A queries it took over one transport. Only A: the node cache's
     * push traffic (SOA checks over UDP, transfers over TCP) comes and goes on its own clock.
     */
    const podForwarderRequests = async (proto: 'tcp' | 'udp') => {
      const text = await httpGet(dnsPod, `http://127.0.0.1:${podForwarderMetrics}/metrics`);
      let sum = 0;
      for (const line of text.split('\n'))
        if (
          line.startsWith('coredns_dns_requests_total{') &&
          line.includes(`proto="${proto}"`) &&
          line.includes('type="A"')
        )
          sum += Number(line.split(' ').at(-1));
      return sum;
    };

    beforeAll(async () => {
      dir = await mkdtemp(join(tmpdir(), 'node-local-'));
      dnsPod = createNetns();
      const kubeconfig = join(dir, 'kubeconfig');
      const api = await launchProcess({
        prefix: dnsPod.prefix,
        script: dist('testkit', 'cli.js'),
        args: [`--manifests=${root}/manifests/demo`, `--kubeconfig=${kubeconfig}`],
      });
      procs.push(api);
      const upstream = await launchProcess({
        prefix: dnsPod.prefix,
        script: dist('testkit', 'upstream-cli.js'),
        // PTRs the Internet would give: one for an address in the demo's Service CIDR (the leak
        // kubernetes/kubernetes#120585 describes), one outside it.
        args: [
          '--host=127.0.0.1',
          '--port=5300',
          `--records=${JSON.stringify({
            'www.example.org.': [{ type: 1, address: '192.0.2.80' }],
            '77.0.96.10.in-addr.arpa.': [{ type: 12, target: 'leaked.example.org.' }],
            '80.2.0.192.in-addr.arpa.': [{ type: 12, target: 'www.example.org.' }],
          })}`,
        ],
      });
      procs.push(upstream);
      const rb = await launchProcess({
        prefix: dnsPod.prefix,
        script: dist('record-builder'),
        args: [
          `--kubecfg-file=${kubeconfig}`,
          '--dns-bind-address=127.0.0.1',
          '--dns-port=10053',
          '--healthz-port=0',
          '--metrics-port=0',
          '--lameduck=0s',
          // The Pod's forwarder, then every node cache (here the one node, on its NOTIFY port).
          '--notify=127.0.0.1:53',
          '--notify-node-cache=192.0.2.1',
        ],
      });
      procs.push(rb);
      rbMetrics = rb.ready.metricsPort as number;
      const fw = await launchProcess({
        prefix: dnsPod.prefix,
        script: dist('forwarder'),
        args: [
          '--no-resolv',
          '--server=/cluster.local/127.0.0.1#10053',
          '--server=/in-addr.arpa/127.0.0.1#10053',
          '--server=/ip6.arpa/127.0.0.1#10053',
          '--server=127.0.0.1#5300',
          // The nodes' network: node caches fetch pushed changes through here.
          '--transfer-relay-from=192.0.2.0/24',
          '--lameduck=0s',
          '--metrics-port=0',
        ],
      });
      procs.push(fw);
      podForwarderMetrics = fw.ready.metricsPort as number;
    });

    afterAll(async () => {
      for (const p of procs.reverse()) await p.stop('SIGKILL');
      dnsPod?.close();
    });

    describe.each(firewalls.map(([name]) => [name]))('with %s', (firewall) => {
      let node: Netns;
      let pod: Netns;
      const started: LaunchedProcess[] = [];
      const startCache = async (extra: string[] = [], nodeBinary?: string) => {
        const base = join(dir, 'Corefile.base');
        writeFileSync(base, manifestCorefile());
        writeFileSync(join(dir, `resolv-${firewall}.conf`), 'nameserver 192.0.2.53\n');
        const cache = await launchProcess({
          prefix: node.prefix,
          script: NODE_CACHE,
          readyMsg: 'node cache ready',
          ...(nodeBinary ? { nodeBinary } : {}),
          env: { KUBE_DNS_UPSTREAM_SERVICE_HOST: '192.0.2.53' },
          // The DaemonSet's args, plus what a test needs: the stand-in link, the firewall, a 1 s sync.
          args: [
            '-localip',
            `${LOCAL_IP},${KUBE_DNS_IP}`,
            '-conf',
            join(dir, `Corefile-${firewall}`),
            '-upstreamsvc',
            'kube-dns-upstream',
            '-pidfile',
            join(dir, `node-cache-${firewall}.pid`),
            `-basecorefile=${base}`,
            `-resolv-file=${join(dir, `resolv-${firewall}.conf`)}`,
            '-interface-type=bridge',
            `-firewall=${firewall}`,
            '-syncinterval=1',
            '-metrics-listen-address=127.0.0.1:9353',
            '-v=4',
            ...extra,
          ],
        });
        started.push(cache);
        return cache;
      };
      const ask = async (name: string, transport = '+notcp') =>
        (await pod.run('dig', [`@${LOCAL_IP}`, '+short', '+tries=1', '+time=2', transport, name])).trim();

      beforeAll(async () => {
        node = createNetns();
        pod = createNetns();
        linkNetns(node, '192.0.2.1/24', dnsPod, '192.0.2.53/24');
        linkNetns(pod, '10.1.0.2/24', node, '10.1.0.1/24');
        await pod.run('ip', ['route', 'add', `${LOCAL_IP}/32`, 'via', '10.1.0.1']);
        pod.writeResolvConf(
          `nameserver ${LOCAL_IP}\nsearch default.svc.cluster.local svc.cluster.local cluster.local\n`,
        );
      });

      afterAll(async () => {
        for (const p of started) await p.stop('SIGKILL');
        pod?.close();
        node?.close();
      });

      it('puts the IPs on the link and its rules in place once each, still once after 3 syncs', async () => {
        const cache = await startCache();
        const link = await node.run('ip', ['-o', 'addr', 'show', 'dev', 'nodelocaldns']);
        expect(link).toContain(`inet ${LOCAL_IP}/32`);
        expect(link).toContain(`inet ${KUBE_DNS_IP}/32`);
        const rules = await rulesOf(node, firewall);
        // node-cache's 12 per IP: NOTRACK and ACCEPT for DNS both ways, NOTRACK for the health port.
        expect(rules).toHaveLength(24);
        expect(new Set(rules).size).toBe(24);
        let checks = 0;
        await cache.waitForLog((l) => l.msg === 'node setup checked' && ++checks >= 3, 15_000, '3 syncs');
        expect(await rulesOf(node, firewall)).toEqual(rules);
        expect(cache.logs.some((l) => l.msg === 'repaired the node’s setup')).toBe(false);
      });

      it('answers a pod through 169.254.20.10: cluster names over UDP and TCP, outside names, search paths', async () => {
        const tcpBefore = await podForwarderRequests('tcp');
        const udpBefore = await podForwarderRequests('udp');
        expect(await ask('kubernetes.default.svc.cluster.local')).toBe('10.96.0.1');
        // The Corefile's force_tcp: the cluster zone reaches the kube-dns Pod over TCP only.
        expect(await podForwarderRequests('tcp')).toBe(tcpBefore + 1);
        expect(await podForwarderRequests('udp')).toBe(udpBefore);
        // On one kept connection: ten more misses, and still one connection opened, held open.
        for (let i = 0; i < 10; i++) expect(await ask(`missing-${i}.default.svc.cluster.local`)).toBe('');
        expect(await podForwarderRequests('tcp')).toBe(tcpBefore + 11);
        const nodeMetrics = await httpGet(pod, `http://${LOCAL_IP}:9253/metrics`);
        expect(metricValue(nodeMetrics, 'clusterdns_forwarder_upstream_tcp_connections_opened_total')).toBe(1);
        expect(metricValue(nodeMetrics, 'clusterdns_forwarder_upstream_tcp_connections')).toBe(1);
        const podMetrics = await httpGet(dnsPod, `http://127.0.0.1:${podForwarderMetrics}/metrics`);
        expect(metricValue(podMetrics, 'clusterdns_forwarder_tcp_connections')).toBe(1);
        expect(await ask('kubernetes.default.svc.cluster.local', '+tcp')).toBe('10.96.0.1');
        expect(await ask('www.example.org')).toBe('192.0.2.80');
        // glibc, with the Pod's search path, as an application asks.
        expect((await pod.run('getent', ['hosts', 'kubernetes.default'])).trim()).toMatch(/^10\.96\.0\.1\s/);
        // The health plugin's address, where the DaemonSet's liveness probe asks.
        expect(await httpGet(pod, `http://${LOCAL_IP}:8080/health`)).toBe('OK');
      });

      it('stays fresh after a change: pushed through the Pod’s forwarder, not waiting out the 30 s TTL', async () => {
        const name = `fresh-${firewall}`;
        const fqdn = `${name}.default.svc.cluster.local`;
        const kubectl = (...args: string[]) =>
          dnsPod.run('kubectl', [`--kubeconfig=${join(dir, 'kubeconfig')}`, '-n', 'default', ...args]);
        await kubectl('create', 'service', 'clusterip', name, '--tcp=80:80');
        const address = await waitFor(async () => (await ask(fqdn)) || undefined, {
          what: `${fqdn} through the node cache`,
          timeoutMs: 10_000,
        });
        expect(address).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
        // Cached now, for up to 30 s (the Corefile's success TTL). The delete must reach it at once.
        expect(await ask(fqdn)).toBe(address);
        // Its endpoints, as the EndpointSlice controller writes them: each layer times the change
        // from the trigger time (the programming-latency SLI), the node cache included.
        const slicePath = join(dir, `slice-${firewall}.json`);
        writeFileSync(
          slicePath,
          JSON.stringify({
            apiVersion: 'discovery.k8s.io/v1',
            kind: 'EndpointSlice',
            metadata: {
              name: `${name}-1`,
              namespace: 'default',
              labels: { 'kubernetes.io/service-name': name },
              annotations: { 'endpoints.kubernetes.io/last-change-trigger-time': new Date().toISOString() },
            },
            addressType: 'IPv4',
            endpoints: [{ addresses: ['10.244.7.7'], conditions: { ready: true } }],
            ports: [{ name: '', port: 80, protocol: 'TCP' }],
          }),
        );
        await kubectl('apply', '-f', slicePath);
        const SLI =
          /^coredns_kubernetes_dns_programming_duration_seconds_count\{service_kind="cluster_ip"\} ([1-9]\d*)$/m;
        for (const [layer, url, netns] of [
          ['record-builder', `http://127.0.0.1:${rbMetrics}/metrics`, dnsPod],
          ['Pod forwarder', `http://127.0.0.1:${podForwarderMetrics}/metrics`, dnsPod],
          ['node cache', `http://${LOCAL_IP}:9253/metrics`, pod],
        ] as const)
          await waitFor(async () => SLI.test(await httpGet(netns, url)) || undefined, {
            what: `the change timed at the ${layer}`,
            timeoutMs: 10_000,
          });
        const deletedAt = performance.now();
        await kubectl('delete', 'service', name);
        try {
          await waitFor(async () => ((await ask(fqdn)) === '' ? true : undefined), {
            what: `${fqdn} gone from the node cache`,
            timeoutMs: 10_000,
          });
        } catch (error) {
          // What each layer holds, for a failure that says where the change stopped.
          const series =
            /notifies_received|notify_changes|zone_transfers_total|zone_serial|transfers_relayed|notify_failures/;
          const pick = (text: string) => text.split('\n').filter((l) => series.test(l) && !l.startsWith('#'));
          const held = [
            `node cache: ${await ask(fqdn)}`,
            `Pod forwarder: ${await node.run('dig', ['@192.0.2.53', '+short', '+tcp', fqdn])}`,
            `record-builder: ${await dnsPod.run('dig', ['@127.0.0.1', '-p', '10053', '+short', fqdn])}`,
            ...pick(await httpGet(pod, `http://${LOCAL_IP}:9253/metrics`)).map((l) => `node cache ${l}`),
            ...pick(await httpGet(dnsPod, `http://127.0.0.1:${podForwarderMetrics}/metrics`)).map((l) => `Pod ${l}`),
            ...pick(await httpGet(dnsPod, `http://127.0.0.1:${rbMetrics}/metrics`)).map((l) => `rb ${l}`),
          ];
          (error as Error).message += `\n${held.join('\n')}\n${(started.at(-1) as LaunchedProcess).tail(12)}`;
          throw error;
        }
        const tookMs = performance.now() - deletedAt;
        console.log(
          `node-local (${firewall}): a deleted Service left the node cache ${tookMs.toFixed(0)} ms after the delete`,
        );
        expect(tookMs).toBeLessThan(10_000);
        const nodeMetrics = await httpGet(pod, `http://${LOCAL_IP}:9253/metrics`);
        expect(nodeMetrics).toMatch(/clusterdns_forwarder_zone_serial\{zone="cluster\.local\."\} \d+/);
        // Its first NOTIFY carried no names (it fetched); the later ones, in step, carried them.
        expect(nodeMetrics).toMatch(/^clusterdns_forwarder_notify_changes_total\{result="applied"\} [1-9]/m);
        const podMetrics = await httpGet(dnsPod, `http://127.0.0.1:${podForwarderMetrics}/metrics`);
        expect(podMetrics).toMatch(/clusterdns_forwarder_transfers_relayed_total\{result="relayed"\} [1-9]/);
      });

      it('answers names and addresses as the API allows them now: digit-leading names, leading zeros, IPv4-mapped, ServiceCIDR PTRs', async () => {
        // Service and namespace names may begin with a digit (Kubernetes 1.36+); objects stored
        // before KEP-4858's validation may hold `010.096.…` (decimal, as Go reads it, never octal)
        // and IPv4-mapped IPv6 (the IPv4 address); testkit's API server stores them as such an old
        // object is stored. Each is answered through the node cache.
        const at = firewalls.findIndex(([name]) => name === firewall) + 20;
        const ns = `1st-${firewall}`;
        const objects = join(dir, `digits-${firewall}.json`);
        const port = [{ name: 'http', port: 80, protocol: 'TCP' }];
        writeFileSync(
          objects,
          // A stream of objects (a v1 List would send kubectl to /openapi/v2 to validate it).
          [
            { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } },
            {
              apiVersion: 'v1',
              kind: 'Service',
              metadata: { name: '2fa', namespace: ns },
              spec: { clusterIP: `010.096.0${at}.007`, clusterIPs: [`010.096.0${at}.007`], ports: port },
            },
            {
              apiVersion: 'v1',
              kind: 'Service',
              metadata: { name: '3db', namespace: ns },
              spec: { clusterIP: 'None', clusterIPs: ['None'], ports: port },
            },
            {
              apiVersion: 'discovery.k8s.io/v1',
              kind: 'EndpointSlice',
              metadata: { name: '3db-1', namespace: ns, labels: { 'kubernetes.io/service-name': '3db' } },
              addressType: 'IPv4',
              endpoints: [{ addresses: [`::ffff:10.244.${at}.9`], hostname: 'db-0', conditions: { ready: true } }],
              ports: port,
            },
          ]
            .map((o) => JSON.stringify(o))
            .join('\n'),
        );
        await dnsPod.run('kubectl', [`--kubeconfig=${join(dir, 'kubeconfig')}`, 'apply', '-f', objects]);
        const dig = async (...args: string[]) =>
          (await pod.run('dig', [`@${LOCAL_IP}`, '+short', '+tries=1', '+time=2', ...args])).trim();
        const fqdn = `2fa.${ns}.svc.cluster.local`;
        expect(
          await waitFor(async () => (await ask(fqdn)) || undefined, {
            what: `${fqdn} through the node cache`,
            timeoutMs: 10_000,
          }),
        ).toBe(`10.96.${at}.7`);
        expect(await dig(`_http._tcp.${fqdn}`, 'SRV')).toBe(`10 100 80 ${fqdn}.`);
        expect(await dig('-x', `10.96.${at}.7`)).toBe(`${fqdn}.`);
        const headless = `3db.${ns}.svc.cluster.local`;
        expect(
          await waitFor(async () => (await ask(headless)) || undefined, { what: headless, timeoutMs: 10_000 }),
        ).toBe(`10.244.${at}.9`);
        // An A record, not an AAAA of ::ffff:…, and its PTR under in-addr.arpa.
        expect(await dig(headless, 'AAAA')).toBe('');
        expect(await dig('-x', `10.244.${at}.9`)).toBe(`db-0.${headless}.`);
        expect(await dig(`db-0.${headless}`)).toBe(`10.244.${at}.9`);
        // An unused address of the cluster's ServiceCIDR (manifests/demo): NXDOMAIN from the
        // cluster, never asked upstream; an address outside it still goes to the upstream.
        expect(await dig('-x', '10.96.0.77')).toBe('');
        expect(await pod.run('dig', [`@${LOCAL_IP}`, '+tries=1', '+time=2', '-x', '10.96.0.77'])).toMatch(
          /status: NXDOMAIN[\s\S]*96\.10\.in-addr\.arpa\.\s+\d+\s+IN\s+SOA/,
        );
        expect(await dig('-x', '192.0.2.80')).toBe('www.example.org.');
        // glibc, with the search path, as an application in the namespace's neighbour asks.
        expect((await pod.run('getent', ['hosts', `2fa.${ns}`])).trim()).toMatch(new RegExp(`^10\\.96\\.${at}\\.7\\s`));
      });

      it('after a SIGKILL leaves the link and rules, the next start repairs them without a duplicate', async () => {
        const previous = started.at(-1) as LaunchedProcess;
        const killedAt = performance.now();
        await previous.stop('SIGKILL');
        expect(await rulesOf(node, firewall)).toHaveLength(24);
        const cache = await startCache();
        const answered = await ask('kubernetes.default.svc.cluster.local');
        const gapMs = performance.now() - killedAt;
        expect(answered).toBe('10.96.0.1');
        console.log(`node-local (${firewall}): DNS back ${gapMs.toFixed(0)} ms after the SIGKILL (a restart at once)`);
        const rules = await rulesOf(node, firewall);
        expect(rules).toHaveLength(24);
        expect(new Set(rules).size).toBe(24);
        expect(cache.logs.some((l) => l.msg === 'added interface')).toBe(false);
      });

      // Once, with the first firewall: the handover does not depend on where the rules live.
      if (firewall === firewalls[0]?.[0])
        it.skipIf('unavailable' in node22)(
          'hands over to a new instance with SO_REUSEPORT under 2,000 QPS: none lost, the rules left to it',
          async () => {
            const binary = (node22 as { path: string }).path;
            await started.at(-1)?.stop('SIGTERM');
            const old = await startCache(['-lameduck=1s'], binary);
            expect(old.logs.find((l) => l.msg === 'ready')?.reusePort).toBe(true);
            // -workers' default on Node 22: one per core, each on its own socket of the port.
            expect(old.logs.find((l) => l.msg === 'ready')?.workers ?? 1).toBe(availableParallelism());
            const load = pod.run(
              process.execPath,
              [
                STEADY,
                JSON.stringify({
                  host: LOCAL_IP,
                  rate: 2000,
                  durationMs: 6000,
                  names: ['kubernetes.default.svc.cluster.local', 'www.example.org', 'pg.data.svc.cluster.local'],
                }),
              ],
              { timeoutMs: 30_000 },
            );
            // The rolling update: the new Pod starts beside the old (maxSurge), then the old one stops.
            const fresh = await startCache(['-lameduck=1s'], binary);
            expect(await old.stop('SIGTERM')).toBe(0);
            const counts = JSON.parse(await load) as {
              sent: number;
              firstTry: number;
              onRetry: number;
              lost: number;
              clientDrops: number;
            };
            console.log(`node-local handover at 2,000 QPS: ${JSON.stringify(counts)}`);
            expect(counts.sent).toBeGreaterThan(10_000);
            // A reply the client's own socket dropped (it was not scheduled in time) was sent; the
            // client's 16 sockets' buffers make that take a stall of seconds. Named apart if it happens.
            expect({ lost: counts.lost, clientDrops: counts.clientDrops }).toEqual({ lost: 0, clientDrops: 0 });
            expect(counts.firstTry + counts.onRetry).toBe(counts.sent);
            expect(old.logs.some((l) => String(l.msg).startsWith('another instance serves the local IPs'))).toBe(true);
            expect(await rulesOf(node, firewall)).toHaveLength(24);
            expect(fresh.logs.some((l) => l.msg === 'added interface')).toBe(false);
            // The new one serves alone now (its /metrics too, on :9253): a second load after the old
            // one left, which may have been after the first load ended on a busy machine, is all its.
            const served = async () =>
              (await httpGet(pod, `http://${LOCAL_IP}:9253/metrics`))
                .split('\n')
                .filter((l) => l.startsWith('coredns_dns_requests_total{'))
                .reduce((n, l) => n + Number(l.split(' ').at(-1)), 0);
            const before = await served();
            const after = JSON.parse(
              await pod.run(
                process.execPath,
                [
                  STEADY,
                  JSON.stringify({
                    host: LOCAL_IP,
                    rate: 500,
                    durationMs: 1000,
                    names: ['kubernetes.default.svc.cluster.local'],
                  }),
                ],
                { timeoutMs: 30_000 },
              ),
            ) as { sent: number; firstTry: number };
            expect(after.firstTry).toBe(after.sent);
            expect((await served()) - before).toBeGreaterThanOrEqual(after.sent);
            // The kernel spread the pods' 16 source ports over every worker's socket (one machine's
            // core is one worker, and no pool to count by).
            const perWorker = (await httpGet(pod, `http://${LOCAL_IP}:9253/metrics`))
              .split('\n')
              .filter((l) => l.startsWith('clusterdns_forwarder_worker_queries_total{'))
              .map((l) => Number(l.split(' ').at(-1)));
            expect(perWorker).toHaveLength(availableParallelism() > 1 ? availableParallelism() : 0);
            for (const n of perWorker) expect(n).toBeGreaterThan(0);
          },
          60_000,
        );

      it('removes the link and every rule on SIGTERM, and keeps them with -skipteardown', async () => {
        const previous = started.at(-1) as LaunchedProcess;
        expect(await previous.stop('SIGTERM')).toBe(0);
        expect(await rulesOf(node, firewall)).toEqual([]);
        await expect(node.run('ip', ['link', 'show', 'dev', 'nodelocaldns'])).rejects.toThrow();
        const kept = await startCache(['-skipteardown']);
        expect(await kept.stop('SIGTERM')).toBe(0);
        expect(await rulesOf(node, firewall)).toHaveLength(24);
        // Tidy for the next firewall's run: a start and a plain stop remove them.
        const last = await startCache();
        expect(await last.stop('SIGTERM')).toBe(0);
        expect(await rulesOf(node, firewall)).toEqual([]);
      });
    });
  },
);
