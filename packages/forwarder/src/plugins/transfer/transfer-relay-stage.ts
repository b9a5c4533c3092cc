import { Buffer } from 'node:buffer';
import type { Logger } from '@cluster-dns/runtime';
import {
  buildBareResponse,
  type Fqdn,
  type Next,
  QTYPE,
  RCODE,
  type Reply,
  randomQueryId,
  type Stage,
  TransferEnd,
  transferTcp,
} from '@cluster-dns/wire';
import type { ForwarderRequest } from '../../config/forwarder-request.js';
import type { RouteTable } from '../../config/route-table.js';
import type { ZoneSync } from '../notify/zone-sync.js';

export interface TransferRelayDeps {
  routes(): RouteTable;
  /** Client addresses allowed to transfer through us (--transfer-relay-from); none by default. */
  allowed(address: string): boolean;
  /** This forwarder's own push state: it catches up before passing a newer serial on. */
  sync: ZoneSync;
  timeoutMs: number;
  log: Logger;
}

/**
 * Zone transfers (IXFR, AXFR) over TCP, relayed to the record-builder, for node caches kept fresh
 * by push: a node cache told of a change (NOTIFY) fetches it from the cluster's DNS, which is this
 * forwarder. Only for a zone that is a `--server` route's own domain, only over TCP, only from
 * --transfer-relay-from, never cached. Before a transfer that brings a newer serial than this
 * forwarder holds is passed on, this forwarder takes the same changes itself, so what the node
 * cache then asks it is never older than what it was told changed. Others are REFUSED.
 */
export class TransferRelayStage implements Stage<ForwarderRequest> {
  readonly name = 'transfer relay';
  readonly counts = { relayed: 0, refused: 0, failed: 0 };

  constructor(private readonly deps: TransferRelayDeps) {}

  serve(request: ForwarderRequest, next: Next<ForwarderRequest>): Reply | Promise<Reply> {
    const q = request.query;
    if (q.qtype !== QTYPE.IXFR && q.qtype !== QTYPE.AXFR) return next(request);
    const bare = (rcode: number) =>
      buildBareResponse(q, rcode, { recursionAvailable: true, udpPayloadBytes: request.udpPayloadBytes });
    const route = this.deps.routes().routeFor(q.key);
    const server = route.servers[0];
    if (
      request.context.transport !== 'tcp' ||
      !this.deps.allowed(request.context.remoteAddress) ||
      route.kind !== 'server' ||
      route.domain !== q.key ||
      !server
    ) {
      this.counts.refused++;
      return bare(RCODE.REFUSED);
    }
    return this.relay(q.raw, q.id, server, route.domain).then(
      (messages) => {
        this.counts.relayed++;
        return messages;
      },
      (error: unknown) => {
        this.counts.failed++;
        this.deps.log.warn('zone transfer relay failed', { zone: q.key, err: error });
        return bare(RCODE.SERVFAIL);
      },
    );
  }

  private async relay(raw: Buffer, id: number, server: { host: string; port: number }, zone: Fqdn): Promise<Buffer[]> {
    const asked = Buffer.from(raw);
    asked.writeUInt16BE(randomQueryId(), 0);
    const end = new TransferEnd();
    const messages: Buffer[] = [];
    await transferTcp(server, asked, {
      timeoutMs: this.deps.timeoutMs,
      onMessage: (message) => {
        const copy = Buffer.from(message);
        copy.writeUInt16BE(id, 0);
        messages.push(copy);
        return end.push(message);
      },
    });
    const held = this.deps.sync.zones().find((z) => z.zone === zone);
    if (held && end.serial !== undefined && held.serial !== end.serial) await this.deps.sync.notify(zone, server.host);
    return messages;
  }
}
