// A client at a steady rate, as a node's pods are: UDP queries to one server, each asked again
// once after retryMs if unanswered (as a stub resolver does), and lost after timeoutMs. Prints
// {sent, firstTry, onRetry, lost} as JSON. Bounded: it stops sending after durationMs and exits
// once every query is answered or lost. Run it inside a network namespace the test made.

import { randomInt } from 'node:crypto';
import dgram from 'node:dgram';
import { buildQueryMessage, encodeMessage, QTYPE } from '@cluster-dns/wire';

const { host, port = 53, rate, durationMs, names, retryMs = 500, timeoutMs = 2000 } = JSON.parse(process.argv[2]);
if (!(rate > 0 && rate <= 20_000 && durationMs > 0 && durationMs <= 60_000))
  throw new Error('rate or duration out of bounds');
const socket = dgram.createSocket('udp4');
const pending = new Map();
const counts = { sent: 0, firstTry: 0, onRetry: 0, lost: 0 };
let next = 0;
socket.on('message', (reply) => {
  const p = pending.get(reply.readUInt16BE(0));
  if (!p) return;
  pending.delete(reply.readUInt16BE(0));
  if (p.retried) counts.onRetry++;
  else counts.firstTry++;
});
const started = performance.now();
const send = () => {
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
  for (const [id, p] of pending) {
    if (!p.retried && now - p.at >= retryMs) {
      p.retried = true;
      socket.send(p.query, port, host);
    } else if (now - p.at >= timeoutMs) {
      pending.delete(id);
      counts.lost++;
    }
  }
  if (now - started >= durationMs && pending.size === 0) {
    clearInterval(tick);
    socket.close();
    process.stdout.write(`${JSON.stringify(counts)}\n`);
  }
}, 5);
