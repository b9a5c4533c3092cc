// Bench case 9's node caches: `count` of them in one process, each a UDP socket of its own on
// 127.0.0.1 that takes NOTIFY as a node cache's -notify-listen-address does. On a NOTIFY for a zone
// a cache fetches that zone's changes (IXFR over TCP from the record-builder, from the serial it
// holds for the zone, one fetch at a time per zone), then answers the NOTIFY, as the forwarder does. For every name of the form
// fan-<k>-<epoch ms>.* that a fetch brings, it notes how long after <epoch ms> it arrived.
// Bounded: it serves until SIGTERM, then prints {count, fetches, full, failed, deliveries, p50, p99,
// max} (the delays in ms) and exits.
//   node bench/node-cache-sim.mjs '{"count":1000,"rbPort":10053,"zone":"cluster.local."}'
// `rbPorts` (instead of rbPort): record-builder replicas in turn; SIGUSR2 moves every cache to the
// next (its Pod went), and the result counts what the fetches after the first move cost (`moved`).
// `positions`: each cache hands back the position its last reply gave, as the forwarder does.
// `refetchMs`: each zone is also fetched that often, as the forwarder's SOA check fetches a zone
// whose serial moved (every zone's serial moves with any change; 0: never), except, as the
// forwarder, a zone kept by its NOTIFYs' names since the last tick whose position is recent.
// A NOTIFY that carries the names changed (notify-changes.ts) in step with the last is taken as
// the forwarder takes it: its names delivered, answered at once, no fetch; out of step or
// incomplete, a fetch first.
import { Buffer } from 'node:buffer';
import dgram from 'node:dgram';
import {
  buildBareResponse,
  buildIxfrQuery,
  decodeNotifyChanges,
  decodeZonePosition,
  ednsOption,
  NOTIFY_CHANGES_OPTION,
  OPCODE,
  parseQuery,
  RCODE,
  randomQueryId,
  transferTcp,
  ZoneChangeReader,
} from '@cluster-dns/wire';

// `zone`: the cluster zone, whose changes are timed; NOTIFY for any zone fetches that zone.
const {
  count,
  rbPort,
  rbPorts = [rbPort],
  positions = false,
  refetchMs = 0,
  zone: clusterZone,
} = JSON.parse(process.argv[2]);
if (!(count > 0 && count <= 5000)) throw new Error('count out of bounds');
const server = { host: '127.0.0.1', port: rbPorts[0] };
/** Deliveries by delay in ms (the last bucket: that long or more): millions of them, in a few MiB. */
const delays = new Uint32Array(600_001);
let deliveries = 0;
let maxDelay = 0;
const noteDelay = (ms) => {
  const d = Math.max(0, Math.min(delays.length - 1, ms));
  delays[d]++;
  deliveries++;
  if (d > maxDelay) maxDelay = d;
};
const totals = { fetches: 0, full: 0, failed: 0, applied: 0, gaps: 0, incomplete: 0 };
const POSITION_REFRESH_MS = 30_000;
/** What fetches cost after the move to the next replica. */
let moved;
let primed = 0;
process.on('SIGUSR2', () => {
  server.port = rbPorts[rbPorts.indexOf(server.port) + 1] ?? server.port;
  // What every fetch after the first move costs, over all the moves.
  moved ??= { fetches: 0, full: 0, failed: 0, bytes: 0 };
  console.log(JSON.stringify({ msg: 'moved', port: server.port }));
});

/** One zone of one cache: the serial held, one fetch at a time, the NOTIFYs waiting on it. */
function zoneOf(zone, onPrimed) {
  /**
   * The changes (fan-<k>-…) this cache has been told of, a bit each: a name told twice (a move, a
   * refetch) is one delivery. A Set of a million names per thousand caches made the simulator
   * itself the slowest part of a long run.
   */
  let delivered = new Uint8Array(1024);
  const deliver = (names) => {
    if (zone !== clusterZone) return;
    const now = Date.now();
    for (const name of names) {
      const m = /^fan-(\d+)-(\d+)\./.exec(name);
      if (!m) continue;
      const k = Number(m[1]);
      while (k >> 3 >= delivered.length) {
        const grown = new Uint8Array(delivered.length * 2);
        grown.set(delivered);
        delivered = grown;
      }
      if (delivered[k >> 3] & (1 << (k & 7))) continue;
      delivered[k >> 3] |= 1 << (k & 7);
      noteDelay(now - Number(m[2]));
    }
  };
  let serial = 0;
  let position;
  let positionOrigin;
  /** As the forwarder: the position refreshed between one and two POSITION_REFRESH_MS after a fetch. */
  let refreshAt = 0;
  /** The sender's serial up to which its names were taken, its process, when last in step. */
  let told;
  let toldOrigin;
  let toldAt = 0;
  let fetching;
  let again = false;
  const waiting = [];
  let ok = true;
  const fetch = async () => {
    do {
      again = false;
      const reader = new ZoneChangeReader();
      const after = moved;
      try {
        const from =
          told !== undefined && positionOrigin && toldOrigin?.equals(positionOrigin) && told > serial ? told : serial;
        const query = buildIxfrQuery(
          randomQueryId(),
          zone,
          from,
          positions ? { position: position ?? Buffer.alloc(0) } : {},
        );
        await transferTcp({ ...server }, query, {
          timeoutMs: 10_000,
          onMessage: (m) => {
            if (after) after.bytes += m.length;
            return reader.push(m);
          },
        });
        const change = reader.result;
        totals.fetches++;
        if (after) after.fetches++;
        if (change?.kind === 'full') {
          totals.full++;
          if (after) after.full++;
        }
        position = change?.position;
        positionOrigin = position && decodeZonePosition(position)?.origin;
        refreshAt = Date.now() + POSITION_REFRESH_MS * (1 + Math.random());
        if (change?.kind === 'incremental') deliver(change.names);
        if (change) {
          if (serial === 0) onPrimed();
          serial = change.serial;
        }
        ok = true;
      } catch {
        totals.failed++;
        if (after) after.failed++;
        ok = false;
      }
    } while (again);
    // As the forwarder: SERVFAIL when the fetch failed, so the record-builder sends it again.
    for (const reply of waiting.splice(0)) reply(ok ? RCODE.NOERROR : RCODE.SERVFAIL);
    fetching = undefined;
  };
  if (refetchMs > 0) {
    let lastTick = 0;
    // Each cache's check at a phase of its own, as nodes' SOA checks are: caches started together
    // would otherwise all fetch in the same millisecond every `refetchMs`.
    const start = setTimeout(() => {
      const timer = setInterval(() => {
        const since = lastTick;
        lastTick = Date.now();
        if (toldAt > since && lastTick < refreshAt) return;
        if (serial !== 0 && !fetching) fetching = fetch();
      }, refetchMs);
      timer.unref();
    }, Math.random() * refetchMs);
    start.unref();
  }
  const fetchThen = (reply) => {
    waiting.push(reply);
    if (fetching) again = true;
    else fetching = fetch();
  };
  return (reply, changes) => {
    if (changes && serial !== 0) {
      deliver(changes.names);
      if (changes.complete && toldOrigin?.equals(changes.origin) && changes.from <= told && told <= changes.to) {
        told = changes.to;
        toldAt = Date.now();
        totals.applied++;
        reply(RCODE.NOERROR);
        return;
      }
    }
    if (changes) totals[changes.complete ? 'gaps' : 'incomplete']++;
    fetchThen((rcode) => {
      if (changes && rcode === RCODE.NOERROR) {
        if (!toldOrigin?.equals(changes.origin) || told === undefined || changes.to > told) {
          told = changes.to;
          toldOrigin = changes.origin;
          toldAt = Date.now();
        }
      }
      reply(rcode);
    });
  };
}

/** A node cache: a NOTIFY for a zone fetches that zone, as the forwarder's zone sync does. */
function cache(socket) {
  const zones = new Map();
  socket.on('message', (msg, rinfo) => {
    let q;
    try {
      q = parseQuery(msg);
    } catch {
      return;
    }
    if (q.opcode !== OPCODE.NOTIFY) return;
    let notified = zones.get(q.key);
    if (!notified) {
      notified = zoneOf(q.key, () => {
        if (q.key === clusterZone && ++primed === count) console.log(JSON.stringify({ msg: 'primed' }));
      });
      zones.set(q.key, notified);
    }
    const data = q.edns === undefined ? undefined : ednsOption(q.raw, NOTIFY_CHANGES_OPTION);
    const changes = data && decodeNotifyChanges(data, q.key);
    notified(
      (rcode) => socket.send(buildBareResponse(q, rcode, { authoritative: true }), rinfo.port, rinfo.address),
      changes,
    );
  });
}

const ports = [];
for (let i = 0; i < count; i++) {
  const socket = dgram.createSocket('udp4');
  await new Promise((r) => socket.bind(0, '127.0.0.1', r));
  ports.push(socket.address().port);
  cache(socket);
}
console.log(JSON.stringify({ msg: 'ready', ports }));
process.on('SIGTERM', () => {
  const at = (q) => {
    if (deliveries === 0) return null;
    const rank = Math.min(deliveries - 1, Math.floor(q * deliveries));
    for (let d = 0, seen = 0; d < delays.length; d++) {
      seen += delays[d];
      if (seen > rank) return d;
    }
    return maxDelay;
  };
  const line = {
    msg: 'result',
    count,
    ...totals,
    deliveries,
    p50: at(0.5),
    p99: at(0.99),
    max: deliveries ? maxDelay : null,
    ...(moved ? { moved } : {}),
  };
  // Exit once the line is written: a pipe takes it asynchronously.
  process.stdout.write(`${JSON.stringify(line)}\n`, () => process.exit(0));
});
