import dgram from 'node:dgram';
import { launchProcess, mutate, seededRandom, waitFor } from '@cluster-dns/testkit';
import { encodeMessage, HEADER_BYTES, QCLASS, QTYPE } from '@cluster-dns/wire';
import { afterEach, describe, expect, it } from 'vitest';
import { dist, rssMiB, SCALE } from '../support/stack.js';

// The sidecar's reply parsing: a "forwarder" that answers every CHAOS statistics query and every
// probe with mutated, truncated or random replies (carrying the query's ID, so they reach the
// parser). The sidecar must stay up, keep /healthz and /metrics answering, count the bad rounds,
// never move a counter backwards or to a non-number, and recover when good replies return.
const SEED = Number(process.env.CLUSTER_DNS_FUZZ_SEED ?? 20261201);
const ROUNDS = 100 * SCALE;

const stops: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const s of stops.splice(0).reverse()) await s();
});

/** dnsmasq's answer to a `<stat>.bind` CHAOS TXT query. */
function statsReply(query: Buffer, value: string): Buffer {
  const reply = encodeMessage({
    id: query.readUInt16BE(0),
    flags: { qr: true, opcode: 0, aa: true, tc: false, rd: true, ra: true, ad: false, cd: false, rcode: 0 },
    questions: [],
    answers: [{ name: 'hits.bind.', type: QTYPE.TXT, class: QCLASS.CH, ttl: 0, text: [value] }],
    authorities: [],
    additionals: [],
  });
  // The asker's own question, octet for octet, so the client's question check passes.
  const end = questionEnd(query);
  return Buffer.concat([
    reply.subarray(0, 4),
    Buffer.from([0, 1]),
    reply.subarray(6, HEADER_BYTES),
    query.subarray(HEADER_BYTES, end),
    reply.subarray(HEADER_BYTES),
  ]);
}

function questionEnd(query: Buffer): number {
  let at = HEADER_BYTES;
  while (at < query.length && query[at] !== 0) at += (query[at] as number) + 1;
  return at + 5;
}

async function garbageServer() {
  const random = seededRandom(SEED);
  const socket = dgram.createSocket('udp4');
  await new Promise<void>((r) => socket.bind(0, '127.0.0.1', () => r()));
  let mode: 'garbage' | 'good' = 'garbage';
  let answered = 0;
  let good = 1000;
  socket.on('message', (query, from) => {
    if (query.length < HEADER_BYTES) return;
    answered++;
    let reply: Buffer;
    if (mode === 'good') reply = statsReply(query, String(good++));
    else {
      const pick = random();
      const base = statsReply(query, pick < 0.1 ? '99999999999999999999999' : String(Math.floor(random() * 1e6)));
      if (pick < 0.2) reply = base;
      else if (pick < 0.3) reply = base.subarray(0, Math.floor(random() * base.length));
      else if (pick < 0.4) {
        reply = Buffer.from(Array.from({ length: Math.floor(random() * 80) }, () => Math.floor(random() * 256)));
        if (reply.length >= 2) query.copy(reply, 0, 0, 2);
      } else {
        reply = base;
        for (let k = 1 + Math.floor(random() * 3); k > 0; k--) reply = mutate(reply, random);
        if (reply.length >= 2) query.copy(reply, 0, 0, 2);
      }
    }
    socket.send(reply, from.port, from.address);
  });
  stops.push(async () => socket.close());
  return {
    port: socket.address().port,
    answered: () => answered,
    beGood: () => {
      mode = 'good';
    },
  };
}

const counters = (text: string) =>
  new Map(
    text
      .split('\n')
      .filter((l) => l.startsWith('kubedns_'))
      .map((l) => {
        const [name, value] = l.split(' ');
        return [name as string, Number(value)] as const;
      }),
  );

describe('sidecar under garbage replies', () => {
  it(
    'stays up, counts every bad round, keeps its counters sane, and recovers',
    async () => {
      const server = await garbageServer();
      const proc = await launchProcess({
        script: dist('sidecar'),
        args: [
          '--prometheus-addr=127.0.0.1',
          '--prometheus-port=0',
          `--dnsmasq-port=${server.port}`,
          '--dnsmasq-poll-interval-ms=100',
          `--probe=fw,127.0.0.1:${server.port},hits.bind,1,A`,
        ],
      });
      stops.push(() => proc.stop('SIGKILL'));
      const url = `http://127.0.0.1:${proc.ready.port}`;
      const seen: Array<Map<string, number>> = [];
      const rss: number[] = [];
      const health: number[] = [];
      // A round ends at its first bad reply, so most rounds get one: wait for ROUNDS replies.
      await waitFor(
        async () => {
          health.push((await fetch(`${url}/healthz`)).status);
          seen.push(counters(await (await fetch(`${url}/metrics`)).text()));
          rss.push(rssMiB(proc.child.pid as number));
          return server.answered() >= ROUNDS;
        },
        { what: `${ROUNDS} garbage replies`, timeoutMs: 60_000 * SCALE, intervalMs: 200 },
      );
      expect(proc.child.exitCode).toBeNull();
      expect(new Set(health)).toEqual(new Set([200]));
      const last = seen.at(-1) as Map<string, number>;
      expect(last.get('kubedns_dnsmasq_errors')).toBeGreaterThan(ROUNDS / 4);
      expect(last.get('kubedns_probe_fw_errors')).toBeGreaterThan(0);
      for (const [name, value] of last) {
        expect(Number.isFinite(value), `${name} = ${value}`).toBe(true);
        // A garbage value never takes a counter past what an honest forwarder could have counted.
        if (name.startsWith('kubedns_dnsmasq_')) expect(value, name).toBeLessThan(Number.MAX_SAFE_INTEGER);
      }
      for (let i = 1; i < seen.length; i++)
        for (const [name, value] of seen[i] as Map<string, number>)
          expect(value, `${name} went backwards`).toBeGreaterThanOrEqual(
            (seen[i - 1] as Map<string, number>).get(name) ?? 0,
          );
      expect(Math.max(...rss) - (rss[0] as number)).toBeLessThan(64);

      server.beGood();
      const errorsAtRecovery = last.get('kubedns_dnsmasq_errors') as number;
      await waitFor(
        async () => {
          const now = counters(await (await fetch(`${url}/metrics`)).text());
          const health = JSON.parse(await (await fetch(`${url}/healthcheck/fw`)).text());
          return health.IsOk === true && (now.get('kubedns_dnsmasq_hits') ?? 0) > 0 && now;
        },
        { what: 'the recovery', timeoutMs: 10_000 },
      );
      const settled = counters(await (await fetch(`${url}/metrics`)).text());
      // Good rounds add no errors beyond those in flight when the server turned good.
      expect((settled.get('kubedns_dnsmasq_errors') as number) - errorsAtRecovery).toBeLessThanOrEqual(2);
      expect(await proc.stop('SIGTERM')).toBe(0);
    },
    120_000 * SCALE,
  );
});
