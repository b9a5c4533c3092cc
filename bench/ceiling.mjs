// The ceiling of a cache hit in Node: a bare dgram server that answers every datagram with one
// stored reply, its ID patched in, and nothing else: no parsing, no lookup, no metrics. What it
// costs per query is what Node itself costs (a receive, a copy, a send); the forwarder's hit path
// is measured against it in the same run (bench case 1).
//   node bench/ceiling.mjs <reply-hex> [plain]   logs {"msg":"ready","port":N}, serves on 127.0.0.1
// Case 1 runs two. The tuned one (the default) takes every shortcut the forwarder takes, so it is
// the floor of what any Node server pays per datagram: the bar ours is held to. `plain` is the
// issue's ceiling as written, "a bare dgram server sending a stored reply with the ID patched",
// with dgram's defaults and Buffer's methods as anyone would write it (a send to an address goes
// through dns.lookup and a tick): it shows how much stricter the tuned bar is.
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
const plain = process.argv[3] === 'plain';
const lookup = (address, _options, callback) => callback(null, address, 4);
const socket = plain ? dgram.createSocket('udp4') : dgram.createSocket({ type: 'udp4', lookup });
socket.on(
  'message',
  plain
    ? (query, rinfo) => {
        if (query.length < 12) return;
        const reply = Buffer.from(stored);
        reply.writeUInt16BE(query.readUInt16BE(0), 0);
        socket.send(reply, rinfo.port, rinfo.address);
      }
    : (query, rinfo) => {
        if (query.length < 12) return;
        const reply = Buffer.allocUnsafe(stored.length);
        reply.set(stored);
        reply[0] = query[0];
        reply[1] = query[1];
        socket.send(reply, rinfo.port, rinfo.address);
      },
);
socket.on('error', () => {
  // A send to a client that went away concerns one datagram; the ceiling keeps serving.
});
socket.bind(0, '127.0.0.1', () => {
  socket.setRecvBufferSize(4 * 1024 * 1024);
  console.log(JSON.stringify({ msg: 'ready', port: socket.address().port }));
});
for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => socket.close(() => process.exit(0)));
