import { Buffer } from 'node:buffer';
import {
  buildQueryMessage,
  chainStages,
  encodeMessage,
  parseQuery,
  QTYPE,
  type Stage,
  toFqdn,
} from '@cluster-dns/wire';
import type { ZoneView } from './answer-builder.js';
import { ClusterState } from './cluster-state.js';
import type { ZoneRequest } from './zone-stage.js';

// The record-builder's first stages (zones, transfers) in front of an end, for their tests.

const zone = toFqdn('cluster.local');
const reverse = [toFqdn('in-addr.arpa'), toFqdn('ip6.arpa')];
export const stageView: ZoneView = {
  zone,
  reverseZones: reverse,
  ttlSeconds: 30,
  pods: 'disabled',
  dnsService: undefined,
  state: new ClusterState({ zone, reverseZones: reverse, ttlSeconds: 30 }),
};

/** A stage in front of an end that records the requests it gets; the reply's rcode, or 'passed'. */
export function through(stages: Array<Stage<ZoneRequest>>, remote = '127.0.0.1') {
  const reached: ZoneRequest[] = [];
  const chain = chainStages<ZoneRequest>(stages, (request) => {
    reached.push(request);
    return undefined;
  });
  const ask = (name: string, type: number = QTYPE.A, transport: 'udp' | 'tcp' = 'udp') => {
    const request: ZoneRequest = {
      query: parseQuery(encodeMessage(buildQueryMessage(1, name, type))),
      context: { transport, remoteAddress: remote, remotePort: 1, family: 4 },
      limitBytes: 512,
      udpPayloadBytes: 1232,
    };
    const reply = chain(request);
    return Buffer.isBuffer(reply) ? reply.readUInt16BE(2) & 0xf : reply === undefined ? 'passed' : 'lazy';
  };
  return { ask, reached };
}
