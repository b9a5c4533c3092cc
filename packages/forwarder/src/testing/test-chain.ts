import { Buffer } from 'node:buffer';
import {
  buildQueryMessage,
  createQueryPipeline,
  type DecodedMessage,
  decodeMessage,
  encodeMessage,
  type Fqdn,
  type Next,
  parseQuery,
  QCLASS,
  QTYPE,
  type QueryContext,
  scanResponse,
} from '@cluster-dns/wire';
import type { ForwarderRequest, Resolved } from '../config/forwarder-request.js';
import type { Route } from '../config/route-table.js';

const UDP: QueryContext = { transport: 'udp', remoteAddress: '127.0.0.1', remotePort: 4000, family: 4 };

export interface AskOptions {
  id?: number;
  qclass?: number;
  opcode?: number;
  edns?: { udpSize: number; dnssecOk?: boolean };
  context?: QueryContext;
}

/** A request as the pipeline would hand it to a handler, for calling a stage directly. */
export function requestFor(name: string, type: number = QTYPE.A): ForwarderRequest {
  return {
    query: parseQuery(encodeMessage(buildQueryMessage(7, name, type))),
    context: UDP,
    limitBytes: 512,
    udpPayloadBytes: 1232,
  };
}

/**
 * Asks a handler (a stage chain) through the real query pipeline, without sockets: the reply is
 * decoded, or the test fails saying none came. For the stages' unit tests.
 */
export function askThrough(handle: Next<ForwarderRequest>) {
  const pipeline = createQueryPipeline({
    handle,
    recursionAvailable: true,
    classes: [QCLASS.IN, QCLASS.CH, QCLASS.ANY],
    opcodes: [0, 4],
  });
  return async (name: string, type: number = QTYPE.A, options: AskOptions = {}): Promise<DecodedMessage> => {
    const raw = encodeMessage(buildQueryMessage(options.id ?? 7, name, type, options));
    const reply = await pipeline(raw, options.context ?? UDP);
    if (!Buffer.isBuffer(reply)) throw new Error(`no single reply to ${name}`);
    return decodeMessage(reply);
  };
}

/** A route of `kind` to 192.0.2.53, as the route table would give it. */
export function testRoute(kind: Route['kind'] = 'upstream', domain = '.'): Route {
  const servers = kind === 'local' ? [] : [{ host: '192.0.2.53', port: 53 }];
  return {
    domain: domain as Fqdn,
    kind,
    servers,
    fallsThrough: false,
    policy: 'sequential',
    loadbalance: false,
    forceTcp: false,
    cache: undefined,
    carryClient: false,
    upstream: undefined,
    id: `${domain}>${kind}`,
  };
}

/**
 * What an upstream said, normalised as resolution.ts leaves it (ID 0, canonical question, no OPT,
 * AA clear): an A answer with `ttl`, or with `rcode` and no answer.
 */
export function resolvedAnswer(
  name: string,
  qtype: number,
  answer: {
    address?: string;
    ttl?: number;
    rcode?: number;
    soaMinimum?: number;
    /** The SOA's owner (the zone apex), example.org by default. */
    soaOwner?: string;
    route?: Route;
  } = {},
): Resolved {
  const rcode = answer.rcode ?? 0;
  const wire = encodeMessage({
    id: 0,
    flags: { qr: true, opcode: 0, aa: false, tc: false, rd: true, ra: true, ad: false, cd: false, rcode },
    questions: [{ name, type: qtype, class: 1 }],
    answers:
      rcode === 0 && answer.address
        ? [{ name, type: QTYPE.A, class: 1, ttl: answer.ttl ?? 60, address: answer.address }]
        : [],
    authorities:
      answer.soaMinimum === undefined
        ? []
        : [
            {
              name: answer.soaOwner ?? 'example.org.',
              type: QTYPE.SOA,
              class: 1,
              ttl: answer.soaMinimum,
              soa: {
                primary: 'ns.example.org.',
                admin: 'hostmaster.example.org.',
                serial: 1,
                refresh: 1,
                retry: 1,
                expiration: 1,
                minimum: answer.soaMinimum,
              },
            },
          ],
    additionals: [],
  });
  return { wire, scanned: scanResponse(wire), route: answer.route ?? testRoute() };
}
