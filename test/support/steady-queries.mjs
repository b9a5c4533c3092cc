// A node's pods at a steady rate: UDP queries to one server from `sockets` client sockets (as
// many pods' stub resolvers, on as many source ports, which a SO_REUSEPORT server spreads over its
// workers), each asked again once after retryMs if unanswered, and lost after timeoutMs. Prints
// {sent, firstTry, onRetry, lost, clientDrops} as JSON. Bounded: it stops sending after durationMs
// and exits once every query is answered or lost. Run it inside a network namespace the test made.
//
// clientDrops is the namespace's UDP RcvbufErrors over the run: replies the kernel had to drop
// because this process was not scheduled in time to read them (seen on busy CI machines, where a
// single socket's default buffer overflowed in a 140 ms stall). Such a reply was sent, so it is
// no loss of the server's; the sockets' buffers are sized so that it takes a long stall.

import { randomInt } from 'node:crypto';
import dgram from 'node:dgram';
import { readFileSync } from 'node:fs';
import { buildQueryMessage, encodeMessage, QTYPE } from '@cluster-dns/wire';

const {
  host,
  port = 53,
  rate,
  durationMs,
  names,
  sockets: socketCount = 16,
  retryMs = 500,
  timeoutMs = 2000,
} = JSON.parse(process.argv[2]);
if (!(rate > 0 && rate <= 20_000 && durationMs > 0 && durationMs <= 60_000 && socketCount >= 1 && socketCount <= 256))
  throw new Error('rate, duration or sockets out of bounds');

/** The namespace's UDP receive-buffer drops, from /proc/net/snmp's Udp lines. */
const rcvbufErrors = () => {
  const [names, values] = readFileSync('/proc/net/snmp', 'utf8')
    .split('\n')
    .filter((l) => l.startsWith('Udp:'))
    .map((l) => l.split(/\s+/));
  return Number(values[names.indexOf('RcvbufErrors')]);
};
const dropsBefore = rcvbufErrors();

const counts = { sent: 0, firstTry: 0, onRetry: 0, lost: 0, clientDrops: 0 };
const clients = Array.from({ length: socketCount }, () => {
  // The kernel caps the size at net.core.rmem_max; whatever it grants is more than the default.
  const socket = dgram.createSocket({ type: 'udp4', recvBufferSize: 4 << 20 });
  const pending = new Map();
  socket.on('message', (reply) => {
    const p = pending.get(reply.readUInt16BE(0));
    if (!p) return;
    pending.delete(reply.readUInt16BE(0));
    if (p.retried) counts.onRetry++;
    else counts.firstTry++;
  });
  return { socket, pending };
});
let next = 0;
const started = performance.now();
const send = () => {
  const { socket, pending } = clients[counts.sent % clients.length];
  let id;
  do id = randomInt(65536);
  while (pending.has(id));
  const query = encodeMessage(buildQueryMessage(id, names[next++ % names.length], QTYPE.A));
  pending.set(id, { query, at: performance.now(), retried: false });
  counts.sent++;
  socket.send(query, port, host);
};
const tick = setInterval(() => {
  const due = Math.floor(((performance.now() - started) / 1000) * rate) - counts.sent;
  if (performance.now() - started < durationMs) for (let i = 0; i < due; i++) send();
  const now = performance.now();
  let open = 0;
  for (const { socket, pending } of clients) {
    for (const [id, p] of pending) {
      if (!p.retried && now - p.at >= retryMs) {
        p.retried = true;
        socket.send(p.query, port, host);
      } else if (now - p.at >= timeoutMs) {
        pending.delete(id);
        counts.lost++;
      }
    }
    open += pending.size;
  }
  if (now - started >= durationMs && open === 0) {
    clearInterval(tick);
    for (const { socket } of clients) socket.close();
    counts.clientDrops = rcvbufErrors() - dropsBefore;
    process.stdout.write(`${JSON.stringify(counts)}\n`);
  }
}, 5);
