import { fixtures, launchProcess } from '@cluster-dns/testkit';
import { QTYPE, queryDns, RCODE } from '@cluster-dns/wire';
import { afterAll, describe, expect, it } from 'vitest';
import {
  baseCluster,
  dist,
  manifestMemoryLimitMiB,
  manifestNodeArgs,
  rssMiB,
  type Stack,
  startStack,
} from '../support/stack.js';

// The whole stack (record-builder, forwarder with --notify push, sidecar) under mixed traffic
// while the API churns: Services deleted and re-created with new cluster IPs, endpoints flipping
// readiness. Every answer is checked against what the API held between the moment the query was
// sent minus the propagation allowance and the moment it was answered. `pnpm test` soaks for 60 s,
// `pnpm soak` for 10 minutes (CLUSTER_DNS_SOAK_SECONDS).
const SECONDS = Number(process.env.CLUSTER_DNS_SOAK_SECONDS ?? 60);
/** More record-builder flags, for an investigation (`--ixfr-journal-mib=1`: the journal full early). */
const RB_ARGS = (process.env.CLUSTER_DNS_SOAK_RB_ARGS ?? '').split(/\s+/).filter(Boolean);
/** Issue 13's propagation target is p99 ≤ 100 ms; a shared two-core CI machine gets ten times that. */
const PROPAGATION_ALLOWANCE_MS = 1000;
/** What a glibc client waits for an answer before it tries again. */
const QUERY_TIMEOUT_MS = 5000;
const CHURNED = 20;
const HEADLESS_PODS = 4;
const CONCURRENCY = 16;
const Z = 'svc.cluster.local';

type RssSample = { at: number; rb: number; fw: number };
type GaugeSample = { journal: number; answers: number; heap: number; external: number };
/** Means of each quarter of the samples, for the report: how flat a figure stays over the run. */
const quarterMeans = <T>(samples: T[], value: (x: T) => number): number[] => {
  const size = Math.max(1, Math.floor(samples.length / 4));
  return [0, 1, 2, 3].map((q) => {
    const part = samples.slice(q * size, q === 3 ? samples.length : (q + 1) * size);
    return part.reduce((sum, x) => sum + value(x), 0) / Math.max(1, part.length);
  });
};
/** What a name resolves to, as a comparable string: sorted A addresses, or the rcode. */
type Value = string;
const NX = 'NXDOMAIN';

/** Each name's history of values, with the time each began. */
class Truth {
  private readonly history = new Map<string, Array<{ from: number; value: Value }>>();
  set(name: string, value: Value): void {
    const list = this.history.get(name) ?? [];
    if (list.at(-1)?.value !== value) list.push({ from: Date.now(), value });
    this.history.set(name, list);
  }
  /** Values the name held at any moment of [from, to]. */
  during(name: string, from: number, to: number): Set<Value> | undefined {
    const list = this.history.get(name);
    if (!list) return undefined;
    const out = new Set<Value>();
    list.forEach((state, i) => {
      const end = list[i + 1]?.from ?? Number.POSITIVE_INFINITY;
      if (state.from <= to && end >= from) out.add(state.value);
    });
    return out;
  }
  ever(name: string): Set<Value> {
    return new Set((this.history.get(name) ?? []).map((s) => s.value));
  }
  /** How long before `at` the name last stopped holding `value` (0 if it still did). */
  staleFor(name: string, value: Value, at: number): number {
    const list = this.history.get(name) ?? [];
    let endedAt = Number.NEGATIVE_INFINITY;
    list.forEach((state, i) => {
      if (state.value !== value || state.from > at) return;
      endedAt = Math.max(endedAt, list[i + 1]?.from ?? Number.POSITIVE_INFINITY);
    });
    return Math.max(0, at - endedAt);
  }
}

let stack: Stack | undefined;
let sidecar: Awaited<ReturnType<typeof launchProcess>> | undefined;
afterAll(async () => {
  await sidecar?.stop('SIGKILL');
  await stack?.close();
});

describe('soak', () => {
  it(
    `serves every answer right through ${SECONDS} s of churn and mixed traffic, within memory`,
    async () => {
      const truth = new Truth();
      const ip = (i: number, generation: number) => `10.97.${generation % 250}.${i + 1}`;
      const generation = new Array<number>(CHURNED).fill(0);
      const podIp = (i: number) => `10.244.9.${i + 1}`;
      const ready = new Array<boolean>(HEADLESS_PODS).fill(true);
      const churnService = (i: number) =>
        fixtures.service('soak', `s${i}`, { clusterIPs: [ip(i, generation[i] as number)] });
      const slice = () =>
        fixtures.endpointSlice(
          'soak',
          'db',
          'db-1',
          ready.map((r, i) => ({ addresses: [podIp(i)], hostname: `db-${i}`, ready: r })),
          { ports: [{ name: 'pg', port: 5432 }] },
        );
      const readyValue = () =>
        ready
          .map((r, i) => (r ? podIp(i) : undefined))
          .filter((a): a is string => a !== undefined)
          .sort()
          .join(',');

      // Each server with its container's heap flags from the manifest: V8 sizes its collections by
      // the heap limit, so without them RSS drifts where the shipped Pod's would not.
      stack = await startStack({
        rbArgs: RB_ARGS,
        rbNodeArgs: manifestNodeArgs('kubedns'),
        fwNodeArgs: manifestNodeArgs('dnsmasq'),
        objects: [
          ...baseCluster(),
          ...Array.from({ length: CHURNED }, (_, i) => churnService(i)),
          fixtures.service('soak', 'db', { headless: true, ports: [{ name: 'pg', port: 5432 }] }),
          slice(),
        ],
      });
      const s = stack;
      sidecar = await launchProcess({
        script: dist('sidecar'),
        args: [
          '--prometheus-addr=127.0.0.1',
          '--prometheus-port=0',
          `--probe=kubedns,127.0.0.1:${s.rbPort},kubernetes.default.${Z},1,A`,
          `--probe=dnsmasq,127.0.0.1:${s.fwPort},kubernetes.default.${Z},1,A`,
          `--dnsmasq-port=${s.fwPort}`,
          '--dnsmasq-poll-interval-ms=1000',
        ],
      });
      for (let i = 0; i < CHURNED; i++) truth.set(`s${i}.soak.${Z}`, ip(i, 0));
      truth.set(`db.soak.${Z}`, readyValue());
      truth.set(`kubernetes.default.${Z}`, '10.96.0.1');
      truth.set(`pay.shop.${Z}`, '192.0.2.7');
      truth.set('www.example.org', '192.0.2.8');

      const started = Date.now();
      const deadline = started + SECONDS * 1000;

      // The churn, one step every 50 ms, each change recorded the moment the API holds it: an
      // endpoint's readiness flipped, or a Service deleted and, a step later, re-created with a new
      // cluster IP (about ten changes a second).
      let changes = 0;
      function* churnSteps(): Generator<() => void> {
        for (let k = 1; ; k++) {
          if (k % 3 === 0) {
            yield () => {
              const i = k % HEADLESS_PODS;
              ready[i] = !ready[i];
              if (!ready.some(Boolean)) ready[(i + 1) % HEADLESS_PODS] = true;
              s.api.apply(slice());
              truth.set(`db.soak.${Z}`, readyValue());
              changes++;
            };
          } else {
            const i = k % CHURNED;
            yield () => {
              s.api.remove('Service', 'soak', `s${i}`);
              truth.set(`s${i}.soak.${Z}`, NX);
            };
            yield () => {
              generation[i] = (generation[i] as number) + 1;
              s.api.apply(churnService(i));
              truth.set(`s${i}.soak.${Z}`, ip(i, generation[i] as number));
              changes++;
            };
          }
        }
      }
      const steps = churnSteps();
      const churn = setInterval(() => steps.next().value?.(), 50);

      // The traffic: hits, churned names, NXDOMAIN in the zone and upstream, TCP for one in ten.
      const outcomes = {
        answered: 0,
        wrong: [] as string[],
        stale: [] as string[],
        timeouts: 0,
        byKind: new Map<string, number>(),
      };
      let n = 0;
      const pick = (): { name: string; kind: string } => {
        n++;
        const r = n % 20;
        if (r < 6) return { name: `s${n % CHURNED}.soak.${Z}`, kind: 'churned service' };
        if (r < 8) return { name: `db.soak.${Z}`, kind: 'headless, readiness flipping' };
        if (r < 11) return { name: `kubernetes.default.${Z}`, kind: 'cache hit' };
        if (r < 12) return { name: `pay.shop.${Z}`, kind: 'ExternalName through upstream' };
        if (r < 14) return { name: 'www.example.org', kind: 'upstream' };
        if (r < 16) return { name: `none${n}.soak.${Z}`, kind: 'NXDOMAIN in the zone' };
        if (r < 17) return { name: `none${n}.example.org`, kind: 'NXDOMAIN upstream' };
        return { name: `s${n % CHURNED}.soak.${Z}`, kind: 'churned service' };
      };
      // Each client is a pod of its own (a source address of 127.0.0.0/8): the forwarder's fair
      // share per client is for pods, and this traffic stands for many.
      const client = async (_: unknown, index: number) => {
        const localAddress = `127.0.0.${10 + index}`;
        while (Date.now() < deadline) {
          const { name, kind } = pick();
          const transport = n % 10 === 0 ? 'tcp' : 'udp';
          const askedAt = Date.now();
          let value: Value;
          try {
            const reply = await queryDns({ host: '127.0.0.1', port: s.fwPort }, name, QTYPE.A, {
              timeoutMs: QUERY_TIMEOUT_MS,
              transport,
              localAddress,
            });
            const addresses = reply.answers.filter((a) => a.type === QTYPE.A).map((a) => a.address as string);
            value =
              reply.flags.rcode === RCODE.NOERROR && addresses.length > 0
                ? addresses.sort().join(',')
                : reply.flags.rcode === RCODE.NXDOMAIN
                  ? NX
                  : `rcode ${reply.flags.rcode}, ${addresses.length} addresses`;
          } catch (error) {
            outcomes.timeouts++;
            outcomes.wrong.push(`${name}: ${(error as Error).message}`);
            continue;
          }
          const answeredAt = Date.now();
          outcomes.answered++;
          outcomes.byKind.set(kind, (outcomes.byKind.get(kind) ?? 0) + 1);
          if (name.startsWith('none')) {
            if (value !== NX) outcomes.wrong.push(`${name}: ${value}`);
            continue;
          }
          const allowed = truth.during(name, askedAt - PROPAGATION_ALLOWANCE_MS, answeredAt);
          if (allowed?.has(value)) continue;
          const late = truth.ever(name).has(value);
          const staleMs = late ? truth.staleFor(name, value, askedAt) : 0;
          (late ? outcomes.stale : outcomes.wrong).push(
            `${name} at +${askedAt - started} ms: ${value}${late ? `, no longer true ${staleMs} ms before it was asked` : ''}, allowed ${[...(allowed ?? [])].join(' | ')}`,
          );
        }
      };

      // Memory: both servers' RSS once a second; the first third is warm-up.
      const rss: RssSample[] = [];
      const sampler = setInterval(() => {
        rss.push({
          at: Date.now() - started,
          rb: rssMiB(s.rb.child.pid as number),
          fw: rssMiB(s.fw.child.pid as number),
        });
      }, 1000);

      // The record-builder's own memory gauges beside its RSS: the IXFR journal and the answer cache.
      const gauges: GaugeSample[] = [];
      const gauge = (text: string, name: string) => Number(new RegExp(`^${name} (\\S+)`, 'm').exec(text)?.[1] ?? 0);
      const scraper = setInterval(() => {
        fetch(`http://127.0.0.1:${s.rb.ready.metricsPort}/metrics`)
          .then((r) => r.text())
          .then((text) =>
            gauges.push({
              journal: gauge(text, 'clusterdns_recordbuilder_journal_bytes'),
              answers: gauge(text, 'clusterdns_recordbuilder_answer_cache_bytes'),
              // The answering thread's heap (prom-client's; the API worker's is not in it).
              heap: gauge(text, 'nodejs_heap_size_used_bytes'),
              external: gauge(text, 'nodejs_external_memory_bytes'),
            }),
          )
          .catch(() => {});
      }, 5000);

      await Promise.all(Array.from({ length: CONCURRENCY }, client));
      clearInterval(churn);
      clearInterval(sampler);
      clearInterval(scraper);
      const kib = (bytes: number) => bytes / 1024;
      const quarters = (values: number[]) => values.map((v) => v.toFixed(1)).join(' → ');
      const rbQuarters = quarterMeans(rss, (x) => x.rb);

      const report = {
        seconds: SECONDS,
        answered: outcomes.answered,
        qps: Math.round(outcomes.answered / SECONDS),
        changes,
        byKind: Object.fromEntries(outcomes.byKind),
        wrong: outcomes.wrong.length,
        stale: outcomes.stale.length,
        timeouts: outcomes.timeouts,
        // Quarter means, MiB: the first quarter is warm-up; flat means the second and last agree.
        rssMiB: { rb: quarters(rbQuarters), fw: quarters(quarterMeans(rss, (x) => x.fw)) },
        rbLastVsSecondQuarter: `${(((rbQuarters[3] as number) / (rbQuarters[1] as number) - 1) * 100).toFixed(1)} %`,
        rbJournalKiB: quarters(quarterMeans(gauges, (g) => kib(g.journal))),
        rbAnswerCacheKiB: quarters(quarterMeans(gauges, (g) => kib(g.answers))),
        rbMainHeapMiB: quarters(quarterMeans(gauges, (g) => g.heap / 1048576)),
        rbExternalMiB: quarters(quarterMeans(gauges, (g) => g.external / 1048576)),
        rbArgs: RB_ARGS.join(' '),
      };
      console.log(`soak: ${JSON.stringify(report)}`);

      expect(s.rb.child.exitCode).toBeNull();
      expect(s.fw.child.exitCode).toBeNull();
      expect(sidecar.child.exitCode).toBeNull();
      expect(outcomes.wrong.slice(0, 10)).toEqual([]);
      expect(outcomes.stale.slice(0, 10)).toEqual([]);
      expect(outcomes.timeouts).toBe(0);
      expect(outcomes.answered).toBeGreaterThan(SECONDS * 100);
      // The load really ran (these are not speed figures: the log line above has those).
      expect(changes).toBeGreaterThan(SECONDS * 2);
      // Memory: a bound only a leak crosses, never a ratio of noisy figures (GC alone swings RSS
      // by 10 %, more on a busy machine). After warm-up (the first third) each server stays under
      // twice its warm-up peak and under its container's memory limit in the manifest. How flat
      // RSS stays is a figure: the log line above here, ten minutes or an hour of `pnpm soak`.
      for (const [key, container] of [
        ['rb', 'kubedns'],
        ['fw', 'dnsmasq'],
      ] as const) {
        const third = Math.floor(rss.length / 3);
        const warmPeak = Math.max(...rss.slice(0, third).map((x) => x[key]));
        const laterPeak = Math.max(...rss.slice(third).map((x) => x[key]));
        const bound = Math.min(2 * warmPeak, manifestMemoryLimitMiB(container));
        expect(laterPeak, `${key} RSS peak ${warmPeak.toFixed(1)} → ${laterPeak.toFixed(1)} MiB`).toBeLessThan(bound);
      }
      // The sidecar saw both servers healthy at the end.
      const url = `http://127.0.0.1:${sidecar.ready.port}`;
      for (const probe of ['kubedns', 'dnsmasq']) expect((await fetch(`${url}/healthcheck/${probe}`)).status).toBe(200);
    },
    (SECONDS + 120) * 1000,
  );
});
