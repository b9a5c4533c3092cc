// The ceiling of a cache hit in Node: a bare dgram server that answers every datagram with one
// stored reply, its ID patched in, and nothing else: no parsing, no lookup, no metrics. What it
// costs per query is what Node itself costs (a receive, a copy, a send); the forwarder's hit path
// is measured against it in the same run (bench case 1).
//   node bench/ceiling.mjs <reply-hex>        logs {"msg":"ready","port":N} and serves on 127.0.0.1
import { Buffer } from 'node:buffer';
import dgram from 'node:dgram';

const stored = Buffer.from(process.argv[2] ?? '', 'hex');
if (stored.length < 12) {
  console.error('usage: node bench/ceiling.mjs <reply as hex, at least a DNS header>');
  process.exit(2);
}
// Every trick the forwarder uses, so the ceiling is Node's and not a slower server's: replies go to
// IP literals, which need no lookup; Buffer is imported (the global is a getter, a call per use);
// the stored reply is copied whole with TypedArray#set.
const lookup = (address, _options, callback) => callback(null, address, 4);
const socket = dgram.createSocket({ type: 'udp4', lookup });
socket.on('message', (query, rinfo) => {
  if (query.length < 12) return;
  const reply = Buffer.allocUnsafe(stored.length);
  reply.set(stored);
  reply[0] = query[0];
  reply[1] = query[1];
  socket.send(reply, rinfo.port, rinfo.address);
});
socket.on('error', () => {
  // A send to a client that went away concerns one datagram; the ceiling keeps serving.
});
socket.bind(0, '127.0.0.1', () => {
  socket.setRecvBufferSize(4 * 1024 * 1024);
  console.log(JSON.stringify({ msg: 'ready', port: socket.address().port }));
});
for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => socket.close(() => process.exit(0)));
