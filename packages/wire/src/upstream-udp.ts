import type { Buffer } from 'node:buffer';
import dgram from 'node:dgram';
import { whenCancelled } from './cancellation.js';
import type { DnsServer, ExchangeOptions } from './client.js';
import { DnsTimeoutError, PoolClosedError } from './errors.js';
import { literalLookup } from './listener.js';
import { checkReply, questionEndOf } from './reply-check.js';
import { createKeptUdp, isLoopback } from './upstream-udp-kept.js';

export interface UpstreamUdp {
  /**
   * Sends one query from a socket of its own and resolves with the first reply from `server` with
   * its ID and question; anything else is reported (`onRejected`) and dropped. Rejects with
   * DnsTimeoutError after `timeoutMs`, with the socket's error, with the cancellation's reason
   * when cancelled, or PoolClosedError after close().
   */
  exchange(server: DnsServer, query: Buffer, options?: ExchangeOptions): Promise<Buffer>;
  /** Sockets open now: one per query in flight, and the kept ones for loopback servers. */
  open(): number;
  /** Fails every query in flight and refuses new ones. */
  close(): void;
}

interface InFlight {
  socket: dgram.Socket;
  timer: NodeJS.Timeout;
  fail(error: Error): void;
}

/**
 * Upstream UDP queries as dnsmasq sends them (RFC 5452 §9.2): each from a socket of its own, on a
 * port the kernel picks at random when it is bound, used for that one query and closed the moment
 * it is answered or given up. A forged reply must guess a port among the whole ephemeral range and
 * an ID (some 2^30 combinations); a port an attacker learns by sending its own queries through us
 * is closed before it could learn it. (A pool of 32 long-lived sockets, the earlier design, left
 * 2^21.) A socket costs less than the checks every reply needs anyway: see `pnpm bench`, case 3.
 * With `keepLoopback`, servers on loopback, which no one off the host can forge for, are asked over
 * a few kept sockets instead (upstream-udp-kept.ts).
 */
export function createUpstreamUdp(settings: { keepLoopback?: boolean } = {}): UpstreamUdp {
  const inFlight = new Set<InFlight>();
  let closed = false;
  const lookups = { 4: literalLookup(4), 6: literalLookup(6) };
  // Servers on loopback (the record-builder in the Pod): a few kept sockets (upstream-udp-kept.ts).
  const kept = settings.keepLoopback ? createKeptUdp() : undefined;

  return {
    exchange(server, query, options = {}) {
      if (closed) return Promise.reject(new PoolClosedError());
      if (kept !== undefined && isLoopback(server.host)) return kept.exchange(server, query, options);
      if (options.cancel?.reason) return Promise.reject(options.cancel.reason);
      const timeoutMs = options.timeoutMs ?? 2000;
      // Servers are IP literals: a colon tells the family (net.isIPv6's regular expression cost a
      // hundredth of a miss).
      const family = server.host.includes(':') ? 6 : 4;
      const queryEnd = questionEndOf(query);
      return new Promise<Buffer>((resolve, reject) => {
        const socket = dgram.createSocket({ type: family === 6 ? 'udp6' : 'udp4', lookup: lookups[family] });
        const done = () => {
          inFlight.delete(entry);
          clearTimeout(entry.timer);
          detach();
          socket.close();
        };
        const entry: InFlight = {
          socket,
          // The timeout's error is made only when it happens: an Error with its stack per query
          // cost a tenth of the forwarder's time on misses.
          timer: setTimeout(
            () => entry.fail(new DnsTimeoutError(`${server.host}:${server.port}`, timeoutMs)),
            timeoutMs,
          ),
          fail: (error) => {
            done();
            reject(error);
          },
        };
        inFlight.add(entry);
        const detach = whenCancelled(options.cancel, entry.fail);
        socket.on('error', (error) => entry.fail(error));
        socket.on('message', (reply, rinfo) => {
          if (rinfo.port !== server.port || rinfo.address !== server.host) return options.onRejected?.('source');
          const reason = checkReply(reply, query, queryEnd);
          if (reason) return options.onRejected?.(reason);
          done();
          resolve(reply);
        });
        // Unbound: the send binds it to a random port of the kernel's ephemeral range.
        socket.send(query, server.port, server.host);
      });
    },
    open: () => inFlight.size + (kept?.sockets() ?? 0),
    close() {
      closed = true;
      kept?.close();
      for (const entry of [...inFlight]) entry.fail(new PoolClosedError());
    },
  };
}
