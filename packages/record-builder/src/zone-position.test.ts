import { Buffer } from 'node:buffer';
import {
  buildIxfrQuery,
  buildQueryMessage,
  type DecodedRr,
  decodeMessage,
  ednsOption,
  encodeMessage,
  objectHash,
  QTYPE,
  toFqdn,
  ZONE_POSITION_OPTION,
} from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import { applyProgress, applyUpdate } from './api-feed.js';
import type { FeedUpdate, ResourceName } from './api-feed-protocol.js';
import type { EndpointGroup, ServiceInfo } from './cluster-model.js';
import { createTestZone, group, svc } from './test-zone.js';
import { UpdateQueue } from './update-queue.js';

// Replicas of the record-builder fed the same API events through the real API worker queue
// (coalescing, batches, progress) in different orders and at different times. Whichever replica
// made a copy of the zones, any other answers an IXFR from its position with what brings that
// copy to its own zone now, and replicas at the same events count the same serial and send the
// same records.

const ALLOWED = '10.0.0.5';
const ZONES = ['cluster.local', 'in-addr.arpa'];

/** A small deterministic generator (mulberry32): a failing seed is a failing case to rerun. */
function random(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    int: (n: number) => Math.floor(next() * n),
    pick: <T>(xs: readonly T[]) => xs[Math.floor(next() * xs.length)] as T,
  };
}

type Value = ServiceInfo | EndpointGroup | null;
interface ApiEvent {
  readonly version: number;
  readonly resource: ResourceName;
  readonly namespace: string;
  readonly name: string;
  readonly value: Value;
}

/** A history of Service and EndpointSlice events with gaps (writes of resources nobody watches). */
function history(seed: number, count: number): ApiEvent[] {
  const r = random(seed);
  const events: ApiEvent[] = [];
  let version = 100;
  const services = ['web', 'pg', 'api'];
  for (let i = 0; i < count; i++) {
    version += 1 + r.int(3);
    const service = r.pick(services);
    const headless = service !== 'web';
    if (r.next() < 0.3) {
      const gone = r.next() < 0.2;
      events.push({
        version,
        resource: 'services',
        namespace: 'ns',
        name: service,
        value: gone
          ? null
          : svc('ns', service, {
              kind: headless ? 'headless' : 'cluster-ip',
              clusterIPs: headless ? [] : [`10.96.0.${10 + r.int(3)}`],
              ports: [{ name: r.pick(['http', 'grpc']), port: 80, protocol: 'tcp' }],
            }),
      });
    } else {
      const slice = `${service}-${r.int(2)}`;
      const gone = r.next() < 0.15;
      const endpoints = Array.from({ length: 1 + r.int(3) }, () => {
        const n = r.int(6);
        return { ip: `10.244.0.${n}`, hostname: r.next() < 0.7 ? `h${n}` : undefined };
      });
      const unique = [...new Map(endpoints.map((e) => [e.ip, e])).values()];
      events.push({
        version,
        resource: 'endpointslices',
        namespace: 'ns',
        name: slice,
        value: gone ? null : group('ns', service, unique, [{ name: 'http', port: 80, protocol: 'tcp' }], slice),
      });
    }
  }
  return events;
}

const RESOURCES: ResourceName[] = ['services', 'endpointslices'];

/** The objects of each resource at `version`, with the version each was last written at. */
function stateAt(events: readonly ApiEvent[], version: number) {
  const objects = new Map<string, ApiEvent>();
  for (const e of events) if (e.version <= version) objects.set(`${e.resource}/${e.namespace}/${e.name}`, e);
  return [...objects.values()].filter((e) => e.value !== null);
}

/**
 * A replica: lists at `listAt`, then reads each resource's watch stream in its own interleaving,
 * and applies what the real UpdateQueue hands over in batches of random size, as the API feed does
 * (`deliverEvery`: how often a batch goes after a read; below 1, an object's changes fold together).
 */
function replica(events: readonly ApiEvent[], listAt: number, seed: number, deliverEvery = 0.7) {
  const r = random(seed);
  const t = createTestZone({ transferTo: [ALLOWED], journalBytes: 8 << 20 });
  const queue = new UpdateQueue();
  const known = new Map<ResourceName, Map<string, string>>(RESOURCES.map((res) => [res, new Map()]));
  const fingerprint = (resource: ResourceName) => {
    let sum = 0;
    for (const [key, rv] of known.get(resource) as Map<string, string>) sum = (sum + objectHash(key, rv)) >>> 0;
    return { count: (known.get(resource) as Map<string, string>).size, sum };
  };
  const read = (e: ApiEvent, version: number) => {
    const key = `${e.namespace}/${e.name}`;
    const objects = known.get(e.resource) as Map<string, string>;
    if (e.value === null) objects.delete(key);
    else objects.set(key, String(e.version));
    const update: FeedUpdate = { ...e, readAtMs: 0, version };
    queue.push(update);
  };
  const deliver = (max: number) => {
    const batch = queue.take(max);
    for (const u of batch.updates) applyUpdate(t.state, u, true);
    for (const m of batch.markers) if (m.kind === 'progress') applyProgress(t.state, m);
  };
  // The list: the state at listAt, its objects in no particular order.
  const listed = stateAt(events, listAt).sort(() => r.next() - 0.5);
  for (const e of listed) read(e, e.version);
  for (const res of RESOURCES) queue.progress(res, listAt, fingerprint(res), true);
  while (!queue.isEmpty) deliver(1 + r.int(4));
  t.state.markServed();
  // The watches: each resource's events in order, the streams read in a random interleaving.
  const streams = RESOURCES.map((res) => events.filter((e) => e.resource === res && e.version > listAt));
  return {
    t,
    /** Reads and applies events until `until` of them are read (all by default). */
    run(until = Number.POSITIVE_INFINITY) {
      let readCount = 0;
      while (streams.some((s) => s.length) && readCount < until) {
        const s = r.pick(streams.filter((x) => x.length));
        const e = s.shift() as ApiEvent;
        read(e, e.version);
        queue.progress(e.resource, e.version, fingerprint(e.resource), false);
        readCount++;
        if (r.next() < deliverEvery) deliver(1 + r.int(5));
      }
      if (until === Number.POSITIVE_INFINITY) while (!queue.isEmpty) deliver(100);
    },
  };
}

const keyOf = (r: DecodedRr) =>
  `${r.name}|${r.type}|${r.address ?? ''}|${r.target ?? ''}|${r.port ?? ''}|${r.priority ?? ''}|${r.weight ?? ''}`;
type Zone = ReturnType<typeof createTestZone>;
const contents = (t: Zone, zone: string) =>
  new Set(
    t
      .messages(encodeMessage(buildQueryMessage(7, zone, QTYPE.AXFR)), ALLOWED)
      .flatMap((m) => decodeMessage(m).answers)
      .filter((r) => r.type !== QTYPE.SOA)
      .map(keyOf),
  );
/** The position a copy made by this replica now would hand back: what its IXFR reply carries. */
const positionOf = (t: Zone, zone: string) => {
  const reply = t.messages(
    buildIxfrQuery(9, toFqdn(zone), t.state.serial, { position: Buffer.alloc(0) }),
    ALLOWED,
  )[0] as Buffer;
  return ednsOption(reply, ZONE_POSITION_OPTION) as Buffer;
};
const ixfr = (t: Zone, zone: string, serial: number, position: Buffer) =>
  t.messages(buildIxfrQuery(8, toFqdn(zone), serial, { position }), ALLOWED).map((m) => decodeMessage(m));
const shape = (answers: DecodedRr[]) =>
  answers.length === 1 ? 'current' : answers[1]?.type === QTYPE.SOA ? 'incremental' : 'full';

/**
 * What a forwarder's cache holds after an IXFR reply: it drops every name the reply lists and asks
 * again, so each listed name then holds the reply's records added there (what the zone has now).
 */
function applied(old: Set<string>, rrs: DecodedRr[]): Set<string> {
  const listed = new Set(rrs.filter((rr) => rr.type !== QTYPE.SOA).map((rr) => rr.name));
  const zone = new Set([...old].filter((key) => !listed.has(key.slice(0, key.indexOf('|')))));
  let soas = 0;
  for (const rr of rrs.slice(1, -1)) {
    if (rr.type === QTYPE.SOA) soas++;
    else if (soas % 2 === 0) zone.add(keyOf(rr));
  }
  return zone;
}

describe('a copy made by one replica, answered by another (the cluster’s clock)', () => {
  it('brings the copy to the other replica’s zone by IXFR, whatever order each replica applied the events in', () => {
    const shapes = new Map<string, number>();
    for (let seed = 1; seed <= 40; seed++) {
      const events = history(seed, 60);
      const r = random(seed * 7);
      // The copy's maker lists at the start and stops partway; the answering replica lists at the
      // start, or later (a replica started during a rollout), and applies everything.
      const maker = replica(events, 100, seed * 11);
      maker.run(r.int(50));
      const listAt = r.next() < 0.5 ? 100 : (events[r.int(30)] as ApiEvent).version;
      const other = replica(events, listAt, seed * 13);
      other.run();
      for (const zone of ZONES) {
        const copy = contents(maker.t, zone);
        const reply = ixfr(other.t, zone, maker.t.state.serial, positionOf(maker.t, zone));
        const answers = reply.flatMap((m) => m.answers);
        const kind = `${listAt === 100 ? 'same start' : 'late'} ${shape(answers)}`;
        shapes.set(kind, (shapes.get(kind) ?? 0) + 1);
        const now = contents(other.t, zone);
        if (kind.endsWith('full')) continue;
        expect([...applied(copy, answers)].sort(), `seed ${seed}, ${zone}`).toEqual([...now].sort());
      }
    }
    // Whole zones only where the journal cannot say: a change folded across the copy's position,
    // or a copy from before a later list whose state differs from the listed one. Most copies are
    // brought by IXFR, also by a replica that listed after them.
    const count = (kind: string) => shapes.get(kind) ?? 0;
    expect(count('same start incremental')).toBeGreaterThan(3 * count('same start full'));
    expect(count('late incremental')).toBeGreaterThan(0);
  });

  it('counts the same serial at the same events, and sends the same records from the same copy', () => {
    for (let seed = 100; seed < 110; seed++) {
      const events = history(seed, 50);
      const maker = replica(events, 100, seed);
      maker.run(20);
      // Each reads the two watches in its own interleaving, and hands each change on as read.
      const x = replica(events, 100, seed + 1, 1);
      const y = replica(events, 100, seed + 2, 1);
      x.run();
      y.run();
      expect(x.t.state.serial).toBe(y.t.state.serial);
      for (const zone of ZONES) {
        const position = positionOf(maker.t, zone);
        const fromX = ixfr(x.t, zone, maker.t.state.serial, position).map((m) => m.answers);
        const fromY = ixfr(y.t, zone, maker.t.state.serial, position).map((m) => m.answers);
        expect(fromY, `seed ${seed}, ${zone}`).toEqual(fromX);
      }
    }
  });

  it('answers its own copies by serial, and a copy it cannot place in whole', () => {
    const events = history(5, 40);
    const a = replica(events, 100, 1);
    a.run(10);
    const serial = a.t.state.serial;
    const position = positionOf(a.t, 'cluster.local');
    a.run();
    // Its own position: by serial, listing every name the exact reply (a secondary's) lists, and
    // the names of states it passed through since (answers a forwarder may have asked then).
    const own = ixfr(a.t, 'cluster.local', serial, position).flatMap((m) => m.answers);
    const plain = a.t
      .messages(buildIxfrQuery(8, toFqdn('cluster.local'), serial), ALLOWED)
      .flatMap((m) => decodeMessage(m).answers);
    expect(shape(own)).toBe('incremental');
    const names = (rrs: DecodedRr[]) => new Set(rrs.filter((r) => r.type !== QTYPE.SOA).map((r) => r.name));
    expect([...names(plain)].filter((n) => !names(own).has(n))).toEqual([]);
    // A replica that listed after the copy, whose state at the list differs from the copy's: whole.
    const late = replica(events, (events.at(-1) as ApiEvent).version, 2);
    late.run();
    const behind = replica(events, 100, 3);
    behind.run(1);
    const raw = late.t.messages(
      buildIxfrQuery(8, toFqdn('cluster.local'), behind.t.state.serial, {
        position: positionOf(behind.t, 'cluster.local'),
      }),
      ALLOWED,
    );
    expect(shape(raw.flatMap((m) => decodeMessage(m).answers))).toBe('full');
    // Yet the reply says where the copy stands now, so the next IXFR is incremental.
    expect(ednsOption(raw[0] as Buffer, ZONE_POSITION_OPTION)).toBeDefined();
  });

  it('after its clock went back (an etcd restore without the bump), answers a copy ahead of it in whole', () => {
    const events = history(9, 30);
    const a = replica(events, 100, 1);
    a.run();
    const b = replica(events, 100, 2);
    b.run(5);
    const copy = positionOf(a.t, 'cluster.local');
    // Before: b, behind the copy, answers it from where it stands (the copy adopts b's position).
    expect(shape(ixfr(b.t, 'cluster.local', a.t.state.serial, copy).flatMap((m) => m.answers))).not.toBe('full');
    // b relists lower than it had read: the clock went back.
    for (const res of RESOURCES) b.t.state.clock.progressed(res, 101, { count: 0, sum: 0 }, true);
    expect(shape(ixfr(b.t, 'cluster.local', a.t.state.serial, copy).flatMap((m) => m.answers))).toBe('full');
  });
});
