import type { Buffer } from 'node:buffer';
import {
  buildIxfrQuery,
  buildQueryMessage,
  type DecodedRr,
  decodeMessage,
  encodeMessage,
  QTYPE,
  RCODE,
  TransferEnd,
  toFqdn,
  ZoneChangeReader,
} from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import { createTestZone, group, svc } from './test-zone.js';

const Z = toFqdn('cluster.local');
const REV = toFqdn('in-addr.arpa');
const ALLOWED = '10.0.0.5';

type Zone = ReturnType<typeof createTestZone>;
const axfr = (t: Zone, zone: string) =>
  t.messages(encodeMessage(buildQueryMessage(7, zone, QTYPE.AXFR)), ALLOWED).flatMap((m) => decodeMessage(m).answers);
const ixfr = (t: Zone, zone: string, serial: number, transport: 'tcp' | 'udp' = 'tcp') =>
  t.messages(buildIxfrQuery(8, toFqdn(zone), serial), ALLOWED, transport).map((m) => decodeMessage(m));

const keyOf = (r: DecodedRr) =>
  `${r.name}|${r.type}|${r.address ?? ''}|${r.target ?? ''}|${r.port ?? ''}|${r.priority ?? ''}|${r.weight ?? ''}|${(r.text ?? []).join(',')}`;
/** A zone's records as a set, the SOAs left out (their serial is what moves). */
const contents = (rrs: DecodedRr[]) => new Set(rrs.filter((r) => r.type !== QTYPE.SOA).map(keyOf));

/** Applies an IXFR reply (RFC 1995 §4) to a copy of the old zone contents. */
function applyIxfr(old: Set<string>, rrs: DecodedRr[]): Set<string> {
  const zone = new Set(old);
  let soas = 0;
  for (const rr of rrs.slice(1, -1)) {
    if (rr.type === QTYPE.SOA) {
      soas++;
      continue;
    }
    // Odd step SOA: deletions follow; even: additions.
    if (soas % 2 === 1) zone.delete(keyOf(rr));
    else zone.add(keyOf(rr));
  }
  return zone;
}

function populated() {
  const t = createTestZone({ transferTo: [ALLOWED], journalBytes: 1 << 20 });
  t.state.upsertService(
    svc('shop', 'web', { clusterIPs: ['10.96.0.20'], ports: [{ name: 'http', port: 80, protocol: 'tcp' }] }),
  );
  t.state.upsertService(svc('data', 'pg', { kind: 'headless', ports: [{ name: 'pg', port: 5432, protocol: 'tcp' }] }));
  t.state.upsertGroup(
    group(
      'data',
      'pg',
      [
        { ip: '10.244.1.31', hostname: 'pg-0' },
        { ip: '10.244.1.32', hostname: 'pg-1' },
        { ip: '10.244.1.33', hostname: 'pg-2' },
      ],
      [{ name: 'pg', port: 5432, protocol: 'tcp' }],
    ),
  );
  return t;
}

/** Every kind of change: a moved IP, a new Service (and namespace), a deletion, an endpoint not ready. */
function change(t: Zone) {
  t.state.upsertService(
    svc('shop', 'web', { clusterIPs: ['10.96.0.21'], ports: [{ name: 'http', port: 80, protocol: 'tcp' }] }),
  );
  t.state.upsertService(svc('new', 'api', { clusterIPs: ['10.96.7.7'] }));
  t.state.upsertService(svc('tmp', 'gone', { clusterIPs: ['10.96.9.9'] }));
  t.state.deleteService('tmp', 'gone');
  t.state.upsertGroup(
    group(
      'data',
      'pg',
      [
        { ip: '10.244.1.31', hostname: 'pg-0' },
        { ip: '10.244.1.32', hostname: 'pg-1', ready: false },
        { ip: '10.244.1.33', hostname: 'pg-2' },
      ],
      [{ name: 'pg', port: 5432, protocol: 'tcp' }],
    ),
  );
}

describe('IXFR from the change journal (RFC 1995)', () => {
  it.each([
    ['the cluster zone', `${Z}`],
    ['the IPv4 reverse zone', `${REV}`],
  ])('turns %s at an old serial into the zone now, exactly', (_label, zone) => {
    const t = populated();
    const serial = t.state.serial;
    const before = contents(axfr(t, zone));
    change(t);
    const replies = ixfr(t, zone, serial);
    const rrs = replies.flatMap((m) => m.answers);
    expect(rrs[0]?.soa?.serial).toBe(t.state.serial);
    expect(rrs[1]?.soa?.serial).toBe(serial);
    expect(rrs.at(-1)?.soa?.serial).toBe(t.state.serial);
    const after = contents(axfr(t, zone));
    expect(after).not.toEqual(before);
    expect(applyIxfr(before, rrs)).toEqual(after);
    // Incremental, not the whole zone: far fewer records than a transfer of everything.
    expect(rrs.length).toBeLessThan(before.size + after.size);
  });

  it('lists only what changed: a record changed and changed back is in neither side', () => {
    const t = populated();
    const serial = t.state.serial;
    t.state.upsertService(
      svc('shop', 'web', { clusterIPs: ['10.96.0.99'], ports: [{ name: 'http', port: 80, protocol: 'tcp' }] }),
    );
    t.state.upsertService(
      svc('shop', 'web', { clusterIPs: ['10.96.0.20'], ports: [{ name: 'http', port: 80, protocol: 'tcp' }] }),
    );
    const rrs = ixfr(t, Z, serial).flatMap((m) => m.answers);
    expect(rrs.filter((r) => r.type !== QTYPE.SOA)).toEqual([]);
  });

  // The SRV of web (target: its own name) did not change with its IP: not listed. A cache holding
  // it with the old address as glue finds it by that name (the forwarder indexes glue names too).
  it('gives the names of a change to a client reading with ZoneChangeReader', () => {
    const t = populated();
    const serial = t.state.serial;
    change(t);
    const reader = new ZoneChangeReader();
    for (const m of t.messages(buildIxfrQuery(8, Z, serial), ALLOWED)) if (reader.push(m)) break;
    const result = reader.result;
    expect(result?.kind).toBe('incremental');
    expect(result?.serial).toBe(t.state.serial);
    const names = result?.kind === 'incremental' ? [...result.names].sort() : [];
    expect(names).toEqual(
      [
        `api.new.svc.${Z}`,
        `pg-1.pg.data.svc.${Z}`,
        `pg.data.svc.${Z}`,
        `web.shop.svc.${Z}`,
        `_pg._tcp.pg.data.svc.${Z}`,
      ].sort(),
    );
  });

  it('ends, for a relay reading with TransferEnd, exactly at the last message of every form of reply', () => {
    const t = populated();
    const before = t.state.serial;
    change(t);
    change(t);
    const forms = {
      incremental: t.messages(buildIxfrQuery(8, Z, before), ALLOWED),
      'up-to-date': t.messages(buildIxfrQuery(8, Z, t.state.serial), ALLOWED),
      'whole zone (IXFR from an unknown serial)': t.messages(buildIxfrQuery(8, Z, 1), ALLOWED),
      axfr: t.messages(encodeMessage(buildQueryMessage(7, Z, QTYPE.AXFR)), ALLOWED),
    };
    for (const [form, messages] of Object.entries(forms)) {
      // Split record by record too: a relay may get any number of records per message. But a
      // first message of the SOA alone is the up-to-date reply (RFC 1995 §4), so it keeps two.
      const records = messages.flatMap((m) => decodeMessage(m).answers);
      const head = decodeMessage(messages[0] as Buffer);
      const one = (answers: typeof records) => encodeMessage({ ...head, answers, authorities: [], additionals: [] });
      const split =
        records.length < 2 ? messages : [one(records.slice(0, 2)), ...records.slice(2).map((rr) => one([rr]))];
      for (const list of [messages, split]) {
        const end = new TransferEnd();
        const done = list.map((m) => end.push(m));
        expect(done.indexOf(true), form).toBe(list.length - 1);
        expect(end.serial, form).toBe(t.state.serial);
      }
    }
  });

  it('encodes an IXFR reply once per client serial and serial: the next asker gets the same bytes, its own ID', () => {
    const t = populated();
    const serial = t.state.serial;
    change(t);
    const first = t.messages(buildIxfrQuery(8, Z, serial), ALLOWED);
    const again = t.messages(buildIxfrQuery(9, Z, serial), ALLOWED);
    expect(again.map((m) => m.readUInt16BE(0))).toEqual(again.map(() => 9));
    expect(again.map((m) => m.subarray(2))).toEqual(first.map((m) => m.subarray(2)));
    // What was handed out is the asker's to keep: changing it changes nothing kept.
    for (const m of first) m.fill(0);
    expect(t.messages(buildIxfrQuery(10, Z, serial), ALLOWED).map((m) => m.subarray(2))).toEqual(
      again.map((m) => m.subarray(2)),
    );
    // A change after: the same question from the same serial gets the newer reply.
    change(t);
    const later = t.messages(buildIxfrQuery(11, Z, serial), ALLOWED).flatMap((m) => decodeMessage(m).answers);
    expect(later[0]?.soa?.serial).toBe(t.state.serial);
  });

  it('answers the current SOA alone when the client is up to date, and over UDP', () => {
    const t = populated();
    const current = ixfr(t, Z, t.state.serial);
    expect(current.flatMap((m) => m.answers).map((r) => r.type)).toEqual([QTYPE.SOA]);
    const serial = t.state.serial;
    change(t);
    const udp = ixfr(t, Z, serial, 'udp');
    expect(udp.flatMap((m) => m.answers).map((r) => r.soa?.serial)).toEqual([t.state.serial]);
  });

  it('sends the whole zone when the journal no longer reaches back, or the serial is from before a restart', () => {
    const t = createTestZone({ transferTo: [ALLOWED], journalBytes: 4096 });
    const serial = t.state.serial;
    for (let i = 0; i < 200; i++) t.state.upsertService(svc('ns', `s${i}`, { clusterIPs: [`10.96.1.${i}`] }));
    expect(t.state.journal?.oldestSerial).toBeGreaterThan(serial);
    const old = ixfr(t, Z, serial).flatMap((m) => m.answers);
    expect(old[1]?.type).not.toBe(QTYPE.SOA);
    expect(old.filter((r) => r.type === QTYPE.A)).toHaveLength(200);
    const future = ixfr(t, Z, t.state.serial + 5).flatMap((m) => m.answers);
    expect(future[1]?.type).not.toBe(QTYPE.SOA);
  });

  it('refuses transfers to clients that are not allowed, and IXFR without a SOA is FORMERR', () => {
    const t = populated();
    const refused = t.messages(buildIxfrQuery(8, Z, t.state.serial), '10.9.9.9').map((m) => decodeMessage(m));
    expect(refused[0]?.flags.rcode).toBe(RCODE.REFUSED);
    const bare = encodeMessage(buildQueryMessage(3, Z, QTYPE.IXFR));
    expect(decodeMessage(t.messages(bare, ALLOWED)[0] as Buffer).flags.rcode).toBe(RCODE.FORMERR);
  });
});

describe('the trigger times handed on with an IXFR (the programming-latency SLI at the forwarders)', () => {
  const PG_PORTS = [{ name: 'pg', port: 5432, protocol: 'tcp' as const }];
  const pgSlice = (ready: boolean, triggerTimeMs: number) => ({
    ...group(
      'data',
      'pg',
      [
        { ip: '10.244.1.31', hostname: 'pg-0' },
        { ip: '10.244.1.32', hostname: 'pg-1', ready },
      ],
      PG_PORTS,
    ),
    triggerTimeMs,
  });
  const read = (messages: Buffer[]) => {
    const reader = new ZoneChangeReader();
    for (const m of messages) if (reader.push(m)) break;
    const result = reader.result;
    return result?.kind === 'incremental' ? result.programmed : undefined;
  };

  it('gives each slice change’s trigger time and its Service’s kind, once per change, to an asker that asks', () => {
    const t = populated();
    t.state.upsertService(svc('shop', 'api', { clusterIPs: ['10.96.0.30'] }));
    const serial = t.state.serial;
    expect(t.state.upsertGroup(pgSlice(false, 1_700_000_000_100))).toEqual({
      kind: 'headless_with_selector',
      triggerMs: 1_700_000_000_100,
    });
    t.state.upsertGroup({ ...group('shop', 'api', [{ ip: '10.244.2.1' }]), triggerTimeMs: 1_700_000_000_200 });
    // The same slice again with the same trigger time (a relist): not a change being programmed.
    expect(t.state.upsertGroup(pgSlice(false, 1_700_000_000_100))).toBeUndefined();
    const asked = t.messages(buildIxfrQuery(8, Z, serial, { programmingTimes: true }), ALLOWED);
    expect(read(asked)).toEqual([
      { kind: 'headless_with_selector', triggerMs: 1_700_000_000_100 },
      { kind: 'cluster_ip', triggerMs: 1_700_000_000_200 },
    ]);
    // In the first message's OPT, the only OPT of the reply.
    expect(asked.map((m) => decodeMessage(m).additionals.filter((r) => r.type === QTYPE.OPT).length)).toEqual(
      asked.map((_, i) => (i === 0 ? 1 : 0)),
    );
  });

  it('sends no OPT to a client that did not ask (RFC 6891 §7), and none with a reverse zone’s transfer', () => {
    const t = populated();
    const serial = t.state.serial;
    t.state.upsertGroup(pgSlice(false, 1_700_000_000_100));
    const plain = t.messages(buildIxfrQuery(8, Z, serial), ALLOWED);
    expect(plain.flatMap((m) => decodeMessage(m).additionals)).toEqual([]);
    expect(read(plain)).toEqual([]);
    const reverse = t.messages(buildIxfrQuery(9, REV, serial, { programmingTimes: true }), ALLOWED);
    expect(read(reverse)).toEqual([]);
    // The kept reply of the first asker is not the answer to the second: they asked differently.
    expect(read(t.messages(buildIxfrQuery(10, Z, serial, { programmingTimes: true }), ALLOWED))).toHaveLength(1);
  });

  it('times nothing of the first list, of a slice without a trigger time, or of a Service not known', () => {
    const t = populated();
    expect(t.state.upsertGroup(pgSlice(false, 1_700_000_000_100), false)).toBeUndefined();
    expect(t.state.upsertGroup(pgSlice(true, 0))).toBeUndefined();
    expect(
      t.state.upsertGroup({ ...group('nowhere', 'nobody', [{ ip: '10.244.9.9' }]), triggerTimeMs: 1_700_000_000_300 }),
    ).toBeUndefined();
    // A new trigger time on the slice whose first one was history: timed.
    expect(t.state.upsertGroup(pgSlice(false, 1_700_000_000_400))?.triggerMs).toBe(1_700_000_000_400);
  });
});
