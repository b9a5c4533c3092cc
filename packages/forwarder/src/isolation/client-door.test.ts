import { Buffer } from 'node:buffer';
import type { ClientLimits } from '@cluster-dns/runtime';
import {
  buildQueryMessage,
  type Cidr,
  clientAddressOf,
  decodeMessage,
  encodeMessage,
  parseCidr,
  QTYPE,
  RCODE,
  toFqdn,
} from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import { buildUpstreamQuery } from '../plugins/forward/upstream.js';
import { ClientDoor } from './client-door.js';

const LIMITS: ClientLimits = {
  qps: 10,
  burst: 2,
  tcpQps: 100,
  tcpBurst: 4,
  slip: 2,
  rrlResponsesPerSecond: 2,
  rrlMinBytes: 512,
  rrlSlip: 2,
};
const query = (id: number, name = 'web.shop.svc.cluster.local') =>
  encodeMessage(buildQueryMessage(id, name, QTYPE.A, { edns: { udpSize: 1232 } }));
/** A reply of `bytes` octets to `name` (its records are padding: only the size and the question count here). */
function reply(name: string, bytes: number): Buffer {
  const head = encodeMessage({
    ...buildQueryMessage(1, name, QTYPE.A),
    flags: { ...buildQueryMessage(1, name, 1).flags, qr: true },
  });
  return Buffer.concat([head, Buffer.alloc(Math.max(0, bytes - head.length))]);
}

function doorAt(limits: Partial<ClientLimits> = {}) {
  const clock = { ms: 0 };
  const door = new ClientDoor({ ...LIMITS, ...limits }, 1232, () => clock.ms);
  return { door, clock };
}

describe('the client door: fairness between clients', () => {
  it('lets a client in up to its burst and rate, then refuses it with every second refusal a TC, while others pass', () => {
    const { door, clock } = doorAt();
    expect([door.admit(query(1), '10.0.0.1', 'udp'), door.admit(query(2), '10.0.0.1', 'udp')]).toEqual([
      undefined,
      undefined,
    ]);
    const over = [3, 4, 5, 6].map((id) => decodeMessage(door.admit(query(id), '10.0.0.1', 'udp') as Buffer));
    expect(over.map((m) => [m.id, m.flags.rcode, m.flags.tc, m.flags.qr, m.flags.ra])).toEqual([
      [3, RCODE.REFUSED, false, true, true],
      [4, RCODE.REFUSED, true, true, true],
      [5, RCODE.REFUSED, false, true, true],
      [6, RCODE.REFUSED, true, true, true],
    ]);
    // The question as asked and our OPT, so the client matches the reply and keeps EDNS.
    expect(over[0]?.questions[0]?.name).toBe('web.shop.svc.cluster.local.');
    expect(over[0]?.additionals.map((r) => [r.type, r.class])).toEqual([[QTYPE.OPT, 1232]]);
    expect(door.admit(query(7), '10.0.0.2', 'udp')).toBeUndefined();
    expect(door.counts).toMatchObject({ clientRefused: 2, clientTruncated: 2 });
    // 100 ms at 10 a second: one more query.
    clock.ms = 100;
    expect(door.admit(query(8), '10.0.0.1', 'udp')).toBeUndefined();
  });

  it('drops the excess of a client still over its rate a second on (a flood), every second one still a TC', () => {
    const { door, clock } = doorAt({ qps: 10, burst: 1 });
    door.admit(query(1), '10.0.0.1', 'udp');
    expect(decodeMessage(door.admit(query(2), '10.0.0.1', 'udp') as Buffer).flags.rcode).toBe(RCODE.REFUSED);
    // Asking faster than 10 a second for a second and more: no token, ever.
    for (let ms = 10; ms < 1000; ms += 10) {
      clock.ms = ms;
      door.admit(query(3), '10.0.0.1', 'udp');
      door.admit(query(4), '10.0.0.1', 'udp');
    }
    clock.ms = 1005;
    const after = [5, 6, 7, 8].map((id) => door.admit(query(id), '10.0.0.1', 'udp'));
    expect(after.map((r) => (r === null ? 'dropped' : decodeMessage(r as Buffer).flags.tc ? 'tc' : 'refused'))).toEqual(
      ['dropped', 'tc', 'dropped', 'tc'],
    );
    expect(door.counts.clientDropped).toBe(2);
    // Over TCP, where the address is proven, the excess is refused, never dropped.
    const tcp = doorAt({ tcpQps: 10, tcpBurst: 1 });
    for (let ms = 0; ms <= 1100; ms += 10) {
      tcp.clock.ms = ms;
      tcp.door.admit(query(1), '10.0.0.1', 'tcp');
      tcp.door.admit(query(2), '10.0.0.1', 'tcp');
    }
    expect(tcp.door.counts.clientDropped).toBe(0);
  });

  it('keeps TCP in a bucket of its own, without TC: a client told to retry over TCP is served there', () => {
    const { door } = doorAt();
    for (let id = 1; id <= 4; id++) door.admit(query(id), '10.0.0.1', 'udp');
    expect(door.admit(query(5), '10.0.0.1', 'tcp')).toBeUndefined();
    for (let id = 6; id <= 8; id++) door.admit(query(id), '10.0.0.1', 'tcp');
    const refused = decodeMessage(door.admit(query(9), '10.0.0.1', 'tcp') as Buffer);
    expect([refused.flags.rcode, refused.flags.tc]).toEqual([RCODE.REFUSED, false]);
  });

  it('drops, never answers, what is not a plain query from a client over its rate', () => {
    const { door } = doorAt({ burst: 1 });
    door.admit(query(1), '10.0.0.1', 'udp');
    const response = Buffer.from(query(2));
    response.writeUInt16BE(response.readUInt16BE(2) | 0x8000, 2);
    expect(door.admit(response, '10.0.0.1', 'udp')).toBeNull();
    expect(door.admit(Buffer.from('0102', 'hex'), '10.0.0.1', 'udp')).toBeNull();
  });

  it('is off at rate 0', () => {
    const { door } = doorAt({ qps: 0, tcpQps: 0, rrlResponsesPerSecond: 0 });
    for (let id = 1; id < 100; id++) expect(door.admit(query(id), '10.0.0.1', 'udp')).toBeUndefined();
    expect(door.release(reply('big.example.org', 1200), '10.0.0.1')).toHaveLength(1200);
  });

  it('limits identical large answers to one address, dropping most and sending every second one as TC; small ones pass', () => {
    const { door, clock } = doorAt();
    const big = reply('db.data.svc.cluster.local', 1200);
    const out = [1, 2, 3, 4, 5, 6].map(() => door.release(big, '10.0.0.1'));
    expect(out.slice(0, 2).map((r) => r?.length)).toEqual([1200, 1200]);
    expect(
      out.slice(2).map((r) => (r === null ? 'dropped' : decodeMessage(r).flags.tc ? `tc ${r.length}` : 'full')),
    ).toEqual(['dropped', 'tc 43', 'dropped', 'tc 43']);
    // Another address, another question, or a small answer: untouched.
    expect(door.release(big, '10.0.0.2')).toBe(big);
    const otherName = reply('web.shop.svc.cluster.local', 1200);
    expect(door.release(otherName, '10.0.0.1')).toBe(otherName);
    const small = reply('db.data.svc.cluster.local', 100);
    expect(door.release(small, '10.0.0.1')).toBe(small);
    // The name in another case is the same question.
    const shouted = reply('DB.DATA.svc.cluster.local', 1200);
    expect(door.release(shouted, '10.0.0.1')).toBeNull();
    expect(door.counts).toMatchObject({ rrlDropped: 3, rrlTruncated: 2 });
    clock.ms = 1000;
    expect(door.release(big, '10.0.0.1')).toBe(big);
  });
});

describe('the client door behind a node cache: the pod it names', () => {
  /** A node cache's query for a pod: what buildUpstreamQuery sends on a route that carries the client. */
  const carried = (id: number, pod: string) =>
    buildUpstreamQuery({
      name: toFqdn('web.shop.svc.cluster.local'),
      qtype: QTYPE.A,
      qclass: 1,
      dnssecOk: false,
      checkingDisabled: false,
      clientAddress: pod,
    }).fill(id & 0xff, 1, 2);
  const trustingNodes = () =>
    new ClientDoor({ ...LIMITS, burst: 2 }, 1232, () => 0, [parseCidr('192.168.0.0/16') as Cidr]);

  it('counts each pod a trusted node cache names against its own rate, not the node’s', () => {
    const door = trustingNodes();
    // Two from pod A pass, its third is refused; pod B, through the same node cache, still passes.
    expect(door.admit(carried(1, '10.244.1.5'), '192.168.0.7', 'udp')).toBeUndefined();
    expect(door.admit(carried(2, '10.244.1.5'), '192.168.0.7', 'udp')).toBeUndefined();
    expect(door.admit(carried(3, '10.244.1.5'), '192.168.0.7', 'udp')).not.toBeUndefined();
    expect(door.admit(carried(4, '10.244.1.9'), '192.168.0.7', 'udp')).toBeUndefined();
    expect(door.counts).toMatchObject({ identityCarried: 4, identityForged: 0 });
  });

  it('ignores and counts a name from an address it does not trust: a pod cannot spend another’s rate', () => {
    const door = trustingNodes();
    // A pod naming a different pod in each query is still counted as itself.
    expect(door.admit(carried(1, '10.244.1.5'), '10.244.2.2', 'udp')).toBeUndefined();
    expect(door.admit(carried(2, '10.244.1.6'), '10.244.2.2', 'udp')).toBeUndefined();
    expect(door.admit(carried(3, '10.244.1.7'), '10.244.2.2', 'udp')).not.toBeUndefined();
    expect(door.counts).toMatchObject({ identityCarried: 0, identityForged: 3 });
  });

  it('reads the option in IPv4 and IPv6 alike (wire’s encoding, as a socket reports addresses)', () => {
    for (const [given, read] of [
      ['10.244.1.5', '10.244.1.5'],
      ['::ffff:10.244.1.5', '10.244.1.5'],
      ['fd00:10:244::5', 'fd00:10:244::5'],
    ]) {
      const q = buildUpstreamQuery({
        name: toFqdn('a.example.org'),
        qtype: QTYPE.A,
        qclass: 1,
        dnssecOk: true,
        checkingDisabled: false,
        clientAddress: given as string,
      });
      expect(clientAddressOf(q)).toBe(read);
      expect(decodeMessage(q).questions[0]?.name).toBe('a.example.org.');
    }
    expect(clientAddressOf(query(1))).toBeUndefined();
  });
});
