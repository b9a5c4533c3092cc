import dgram from 'node:dgram';
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
      const until = Date.now() + 4000 * SCALE;
      while (Date.now() < until) {
        for (const proc of [s.fw, s.rb]) {
          const started = Date.now();
          const res = await fetch(metricsUrl(proc), { signal: AbortSignal.timeout(5000) });
          await res.text();
          statuses.push(res.status);
          latencies.push(Date.now() - started);
        }
        await new Promise((r) => setTimeout(r, 100));
      }
      flooding = false;
      await flood;
      for (const socket of sockets) socket.close();
      expect(sent).toBeGreaterThan(20_000);
      expect(new Set(statuses)).toEqual(new Set([200]));
      expect(Math.max(...latencies)).toBeLessThan(3000);
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
        fwPrefix: ['prlimit', '--nofile=128:128', '--'],
        fwArgs: ['--max-tcp-connections=5000', '--max-tcp-connections-per-client=5000'],
      });
      const s = stack;
      const ask = (name: string, transport: 'udp' | 'tcp' = 'udp') =>
        queryDns({ host: '127.0.0.1', port: s.fwPort }, name, QTYPE.A, { timeoutMs: 3000, transport });
      expect((await ask('www.example.org')).answers).toHaveLength(1);
      // Hold TCP connections open until the forwarder can take no more.
      const held: net.Socket[] = [];
      for (let i = 0; i < 300; i++) {
        const socket = net.connect(s.fwPort, '127.0.0.1');
        socket.on('error', () => {});
        held.push(socket);
      }
      // A miss needs a socket to ask upstream: the first one fails with EMFILE, logged.
      void ask('n1.example.org').catch(() => undefined);
      await waitFor(() => s.fw.logs.some((l) => JSON.stringify(l).includes('EMFILE')) || undefined, {
        what: 'the forwarder to run out of descriptors',
        timeoutMs: 10_000,
      });
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
