// TCP clients that pipeline queries and never read the answers (case 10's attack d): `connections`
// connections from `from`, each writing `pipeline` queries for `name` at once, then holding the
// connection open unread for `durationMs`. Prints how many the server closed. Loopback only.
import net from 'node:net';
import { buildQueryMessage, encodeMessage } from '@cluster-dns/wire';

const { port, from, name, connections, pipeline, durationMs } = JSON.parse(process.argv[2]);
const query = encodeMessage(buildQueryMessage(1, name, 1));
const frame = Buffer.concat([Buffer.from([query.length >> 8, query.length & 0xff]), query]);
const burst = Buffer.concat(Array.from({ length: pipeline }, () => frame));
let closedByServer = 0;
let opened = 0;
for (let c = 0; c < connections; c++) {
  const socket = net.connect({ host: '127.0.0.1', port, localAddress: from }, () => {
    opened++;
    socket.pause();
    socket.write(burst);
  });
  socket.on('error', () => {});
  socket.on('close', () => closedByServer++);
  setTimeout(() => socket.destroy(), durationMs).unref();
}
setTimeout(() => {
  process.stdout.write(`${JSON.stringify({ opened, closedByServer })}\n`);
  process.exit(0);
}, durationMs - 50);
