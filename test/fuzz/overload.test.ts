import dgram from 'node:dgram';
import { readdirSync } from 'node:fs';
import net from 'node:net';
import { query, waitFor } from '@cluster-dns/testkit';
import { QTYPE, queryDns, RCODE } from '@cluster-dns/wire';
import { afterEach, describe, expect, it } from 'vitest';
import { SCALE, type Stack, startStack } from '../support/stack.js';

// Operations under pressure: the metrics endpoints while the DNS ports are flooded, and the
// forwarder when it runs out of file descriptors.
let stack: Stack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

const metricsUrl = (proc: Stack['rb']) => `http://127.0.0.1:${proc.ready.metricsPort}/metrics`;
/** Prometheus's default scrape_timeout: a scrape slower than this is a failed scrape. */
const SCRAPE_TIMEOUT_MS = 10_000;

const DESCRIPTOR_LIMIT = 128;

/** Open descriptors of a process, as the kernel counts them against its RLIMIT_NOFILE. */
const openDescriptors = (pid: number) => readdirSync(`/proc/${pid}/fd`).length;

describe('overload', () => {
  it(
    'answers /metrics on both servers while their DNS ports are flooded',
    async () => {
      stack = await startStack();
      const s = stack;
      const sockets = await Promise.all(
        Array.from({ length: 4 }, async () => {
          const socket = dgram.createSocket('udp4');
          await new Promise<void>((r) => socket.bind(0, '127.0.0.1', () => r()));
          socket.on('message', () => {});
          return socket;
        }),
      );
      let sent = 0;
      let flooding = true;
      // Names nobody cached, half for the cluster (record-builder), half upstream.
      const flood = (async () => {
        while (flooding) {
          for (let i = 0; i < 200; i++, sent++) {
            const name =
              sent % 2
                ? ['n', String(sent), 'default', 'svc', 'cluster', 'local']
                : ['n', String(sent), 'example', 'org'];
            const port = sent % 3 === 0 ? s.rbPort : s.fwPort;
            (sockets[sent % sockets.length] as dgram.Socket).send(query(name), port, '127.0.0.1');
          }
          await new Promise((r) => setImmediate(r));
        }
      })();
      const latencies: number[] = [];
      const statuses: number[] = [];
      // Scrapes back to back for as long as it takes the flood to send its 20,000 queries, and at
      // least 20 rounds: a count, not a duration, so a slow machine floods and scrapes as much.
      for (let round = 0; round < 20 * SCALE || sent < 20_000 * SCALE; round++) {
        for (const proc of [s.fw, s.rb]) {
          const started = Date.now();
          const res = await fetch(metricsUrl(proc), { signal: AbortSignal.timeout(SCRAPE_TIMEOUT_MS) });
          await res.text();
          statuses.push(res.status);
          latencies.push(Date.now() - started);
        }
      }
      flooding = false;
      await flood;
      for (const socket of sockets) socket.close();
      expect(new Set(statuses)).toEqual(new Set([200]));
      expect(Math.max(...latencies)).toBeLessThan(SCRAPE_TIMEOUT_MS);
      expect(s.fw.child.exitCode).toBeNull();
      expect(s.rb.child.exitCode).toBeNull();
      // The flood's tail still waits in the socket buffers, and while it does a miss may be shed
      // (REFUSED at --dns-forward-max): it must drain and answer right again within seconds.
      const drainStarted = Date.now();
      await waitFor(
        async () => {
          const after = await queryDns(
            { host: '127.0.0.1', port: s.fwPort },
            'kubernetes.default.svc.cluster.local',
            QTYPE.A,
          ).catch(() => undefined);
          return after?.answers.map((a) => a.address).join() === '10.96.0.1' || undefined;
        },
        { what: 'answers again after the flood', timeoutMs: 20_000 },
      );
      expect(Date.now() - drainStarted).toBeLessThan(20_000);
    },
    60_000 + 4000 * SCALE,
  );

  it(
    'survives running out of file descriptors and recovers when they free up',
    async () => {
      stack = await startStack({
        fwPrefix: ['prlimit', `--nofile=${DESCRIPTOR_LIMIT}:${DESCRIPTOR_LIMIT}`, '--'],
        fwArgs: ['--max-tcp-connections=5000', '--max-tcp-connections-per-client=5000'],
      });
      const s = stack;
      const pid = s.fw.child.pid as number;
      const ask = (name: string, transport: 'udp' | 'tcp' = 'udp') =>
        queryDns({ host: '127.0.0.1', port: s.fwPort }, name, QTYPE.A, { timeoutMs: 3000, transport });
      expect((await ask('www.example.org')).answers).toHaveLength(1);
      // Hold TCP connections open until every descriptor the forwarder may have is in use. (libuv
      // keeps one in reserve to accept and close what it cannot keep, and frees it while it does:
      // the count stops one or two short, and a busy machine's samples can all land at two short.)
      const held: net.Socket[] = [];
      for (let i = 0; i < 300; i++) {
        const socket = net.connect(s.fwPort, '127.0.0.1');
        socket.on('error', () => {});
        held.push(socket);
      }
      await waitFor(() => openDescriptors(pid) >= DESCRIPTOR_LIMIT - 2, {
        what: `the forwarder to hold ${DESCRIPTOR_LIMIT - 2} of its ${DESCRIPTOR_LIMIT} descriptors`,
        seen: () => `${openDescriptors(pid)} open; ${s.fw.tail(3)}`,
      });
      // A miss needs a socket to ask upstream, which it may not get: it may fail, never crash.
      await ask('n1.example.org').catch(() => undefined);
      // Cached answers need no descriptor; everything else may fail, but the process stays up.
      expect((await ask('www.example.org')).answers).toHaveLength(1);
      await ask('kubernetes.default.svc.cluster.local').catch(() => undefined);
      expect(s.fw.child.exitCode).toBeNull();
      for (const socket of held) socket.destroy();
      await waitFor(
        async () => {
          const reply = await ask('nothing.shop.svc.cluster.local').catch(() => undefined);
          return reply?.flags.rcode === RCODE.NXDOMAIN || undefined;
        },
        { what: 'recovery after the descriptors free up', timeoutMs: 15_000 },
      );
      expect((await ask('web.shop.svc.cluster.local')).answers.map((a) => a.address)).toEqual(['10.96.1.10']);
      expect((await ask('web.shop.svc.cluster.local', 'tcp')).answers).toHaveLength(1);
      expect(s.fw.child.exitCode).toBeNull();
    },
    60_000 + 4000 * SCALE,
  );
});
