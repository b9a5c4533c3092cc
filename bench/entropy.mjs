// Bench case 3's poisoning figures (RFC 5452): how hard an upstream reply is to forge. A test
// upstream answers 1,000 misses of each server and notes the source port of each query; then, as an
// attacker who sent those queries itself would, we look which of the ports it learnt are still open
// in the server (counted in /proc). A forger must hit an open port and the ID together.
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { replyTo, startTestUpstream } from '@cluster-dns/testkit';
import { QTYPE, queryDns } from '@cluster-dns/wire';
import { round } from './lib.mjs';

/** Local ports of the UDP sockets `pid` holds open now. */
export function openUdpPorts(pid) {
  const inodes = new Set();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const target = readlinkSync(`/proc/${pid}/fd/${fd}`);
      const m = /^socket:\[(\d+)\]$/.exec(target);
      if (m) inodes.add(m[1]);
    } catch {
      // Closed between the listing and the read.
    }
  }
  const ports = new Set();
  for (const table of ['udp', 'udp6']) {
    for (const line of readFileSync(`/proc/${pid}/net/${table}`, 'utf8').split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length > 9 && inodes.has(f[9])) ports.add(Number.parseInt(f[1].split(':')[1], 16));
    }
  }
  return ports;
}

/** The kernel's ephemeral range: where a port picked at random comes from. */
function ephemeralPorts() {
  const [low, high] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
  return high - low + 1;
}

/**
 * For each server ({ name, pid, start(upstreamAddress) → { port, stop } }): 1,000 misses, the
 * distinct source ports they went out from, and how many of those are open right after.
 */
export async function runPortEntropy({ row, servers, misses = 1000 }) {
  const upstream = await startTestUpstream({
    script: (q) => replyTo(q, { answers: [{ name: q.qname, type: QTYPE.A, class: 1, ttl: 60, address: '192.0.2.1' }] }),
  });
  const range = ephemeralPorts();
  for (const server of servers) {
    const running = await server.start(upstream.address);
    const from = upstream.queries.length;
    let next = 0;
    const ask = async () => {
      while (next < misses) {
        const i = next++;
        await queryDns(
          { host: '127.0.0.1', port: running.port },
          `n${i}.${server.name.replace(/\W/g, '')}.example.org`,
          QTYPE.A,
          {
            timeoutMs: 3000,
          },
        ).catch(() => undefined);
      }
    };
    await Promise.all(Array.from({ length: 8 }, ask));
    const ports = upstream.queries.slice(from).map((q) => q.port);
    const distinct = new Set(ports);
    const open = openUdpPorts(running.pid);
    const stillOpen = [...distinct].filter((p) => open.has(p)).length;
    // What a forger must guess for a query in flight, with the ID: among the ports it learnt if they
    // stay open (a pool), else a port drawn from the whole ephemeral range.
    const portsToGuess = stillOpen > 0 ? stillOpen : range;
    row('3. upstream source ports of 1,000 misses (RFC 5452)', server.name, {
      tool: 'timer',
      misses: ports.length,
      distinctPorts: distinct.size,
      learntPortsStillOpen: stillOpen,
      forgeryBits: round(Math.log2(portsToGuess * 65536), 1),
    });
    await running.stop();
  }
  await upstream.close();
}
