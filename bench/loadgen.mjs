// A DNS load generator in its own process, for when dnsperf is not installed and for latency
// percentiles (dnsperf reports only the average). Reads its job as JSON in argv[2], prints a JSON
// result. Bounded: it stops after durationMs and never targets anything but the given host.
import dgram from 'node:dgram';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { buildQueryMessage, encodeMessage, typeFromName } from '@cluster-dns/wire';

// The job is JSON in argv[2], or `@file` holding it (large name lists do not fit in argv).
const arg = process.argv[2];
const job = JSON.parse(arg.startsWith('@') ? readFileSync(arg.slice(1), 'utf8') : arg);
const {
  host,
  port,
  transport = 'udp',
  names,
  rate = 0,
  durationMs = 10_000,
  window = 64,
  connections = 4,
  timeoutMs = 2000,
} = job;
if (host !== '127.0.0.1' && host !== '::1') throw new Error('the load generator only targets loopback');

const queries = names.map(([name, type]) =>
  encodeMessage(buildQueryMessage(0, name, typeof type === 'number' ? type : typeFromName(type))),
);
const sentAt = new Float64Array(65536);
const latencies = [];
let sent = 0;
let received = 0;
let nextId = 0;
let nextName = 0;
const start = performance.now();
const deadline = start + durationMs;
// This process's own delays: a reply it reads late counts as a slow answer, so a tail that shows
// here too is the load generator's (its core is shared), not the server's.
const loopDelay = monitorEventLoopDelay({ resolution: 1 });
loopDelay.enable();

function nextQuery() {
  const id = nextId;
  nextId = (nextId + 1) & 0xffff;
  const q = Buffer.from(queries[nextName]);
  nextName = (nextName + 1) % queries.length;
  q.writeUInt16BE(id, 0);
  sentAt[id] = performance.now();
  sent++;
  return q;
}

function onReply(msg) {
  const id = msg.readUInt16BE(0);
  const t = sentAt[id];
  if (t === 0) return;
  sentAt[id] = 0;
  received++;
  latencies.push(performance.now() - t);
  return true;
}

const QUANTILES = [0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9999];

function finish() {
  const elapsed = (Math.min(performance.now(), deadline) - start) / 1000;
  latencies.sort((a, b) => a - b);
  const pct = (p) =>
    latencies.length ? latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * p))] : null;
  process.stdout.write(
    `${JSON.stringify({
      sent,
      received,
      lost: sent - received,
      qps: received / elapsed,
      p50Ms: pct(0.5),
      p99Ms: pct(0.99),
      maxMs: latencies.at(-1) ?? null,
      // The distribution, for the latency chart (bench/charts.mjs).
      quantilesMs: QUANTILES.map((q) => [q, pct(q)]),
      // How late its 1 ms timer ran, the 1 ms taken off.
      ownLateP99Ms: Math.max(0, Math.round(loopDelay.percentile(99) / 1e4) / 100 - 1),
      ownLateMaxMs: Math.max(0, Math.round(loopDelay.max / 1e4) / 100 - 1),
    })}\n`,
  );
  process.exit(0);
}

if (transport === 'udp') {
  const socket = dgram.createSocket('udp4');
  socket.on('error', () => {});
  socket.on('message', (msg) => {
    if (!onReply(msg)) return;
    if (rate === 0 && performance.now() < deadline) socket.send(nextQuery(), port, host);
  });
  socket.bind(0, '127.0.0.1', () => {
    // A server that stalls answers the queries it held in one burst: with the default 208 KiB
    // buffer some of those answers were dropped here and counted as lost by the server.
    try {
      socket.setRecvBufferSize(4 * 1024 * 1024);
    } catch {}
    if (rate === 0) {
      for (let i = 0; i < window; i++) socket.send(nextQuery(), port, host);
      // Refill the window for queries that were lost.
      setInterval(() => {
        const stale = performance.now() - timeoutMs;
        let lost = 0;
        for (let i = 0; i < 65536; i++) {
          if (sentAt[i] !== 0 && sentAt[i] < stale) {
            sentAt[i] = 0;
            lost++;
          }
        }
        for (let i = 0; i < lost && performance.now() < deadline; i++) socket.send(nextQuery(), port, host);
      }, 500).unref();
    } else {
      let credit = 0;
      let last = performance.now();
      const tick = setInterval(() => {
        const now = performance.now();
        if (now >= deadline) return clearInterval(tick);
        credit += ((now - last) * rate) / 1000;
        last = now;
        while (credit >= 1) {
          socket.send(nextQuery(), port, host);
          credit--;
        }
      }, 1);
    }
    setTimeout(finish, durationMs + Math.min(timeoutMs, 1000));
  });
} else {
  for (let c = 0; c < connections; c++) {
    const socket = net.connect({ host, port, noDelay: true });
    let buffered = Buffer.alloc(0);
    const send = () => {
      const q = nextQuery();
      const frame = Buffer.allocUnsafe(q.length + 2);
      frame.writeUInt16BE(q.length, 0);
      q.copy(frame, 2);
      socket.write(frame);
    };
    socket.on('error', () => {});
    socket.on('connect', () => {
      for (let i = 0; i < window; i++) send();
    });
    socket.on('data', (chunk) => {
      buffered = buffered.length ? Buffer.concat([buffered, chunk]) : chunk;
      while (buffered.length >= 2 && buffered.length >= 2 + buffered.readUInt16BE(0)) {
        const msg = buffered.subarray(2, 2 + buffered.readUInt16BE(0));
        buffered = buffered.subarray(2 + msg.length);
        onReply(msg);
        if (performance.now() < deadline) send();
      }
    });
  }
  setTimeout(finish, durationMs + 200);
}
