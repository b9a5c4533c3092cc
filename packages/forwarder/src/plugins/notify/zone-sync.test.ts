import { Buffer } from 'node:buffer';
import { createSilentLogger } from '@cluster-dns/runtime';
import { type Fqdn, serialNewer, toFqdn, type ZoneChange } from '@cluster-dns/wire';
import { describe, expect, it, vi } from 'vitest';
import { createZoneSync } from './zone-sync.js';

const Z = toFqdn('cluster.local');
const RB = { host: '127.0.0.1', port: 10053 };

function harness(
  transfer: (serial: number) => Promise<ZoneChange>,
  extra: { recheckAfterMs?: number[]; now?: () => number } = {},
) {
  const evicted: Fqdn[][] = [];
  const flushed: Fqdn[] = [];
  let serial = 100;
  const transfers: number[] = [];
  const sync = createZoneSync({
    serverFor: (zone) => (zone === Z ? RB : undefined),
    allowedSources: () => ['127.0.0.1'],
    transfer: (_server, _zone, from) => {
      transfers.push(from);
      return transfer(from);
    },
    soaSerial: async () => serial,
    evictNames: (names) => {
      evicted.push([...names].sort());
      return evicted.at(-1)?.length ?? 0;
    },
    flushZone: (zone) => {
      flushed.push(zone);
      return 1;
    },
    log: createSilentLogger(),
    ...extra,
  });
  return {
    sync,
    evicted,
    flushed,
    transfers,
    setSerial: (s: number) => {
      serial = s;
    },
  };
}

describe('zone sync: NOTIFY → IXFR → eviction, without sockets', () => {
  it('refuses a NOTIFY from anyone but the zone’s servers, and leaves the zone unpushed', async () => {
    const h = harness(async () => ({ kind: 'up-to-date', serial: 100 }));
    expect(await h.sync.notify(Z, '10.0.0.9')).toBe('refused');
    expect(h.sync.isPushed(toFqdn(`web.shop.svc.${Z}`))).toBe(false);
  });

  it('on the first NOTIFY flushes the zone once and learns the serial; then evicts changed names and their ancestors', async () => {
    const h = harness(async () => ({
      kind: 'incremental',
      serial: 101,
      names: new Set([toFqdn(`new.shop.svc.${Z}`)]),
      programmed: [],
    }));
    expect(await h.sync.notify(Z, '::ffff:127.0.0.1')).toBe('accepted');
    expect(h.flushed).toEqual([Z]);
    // The serial learnt (100), then at once what changed since it: the SOA may have come from a
    // cache behind the server, and what was asked again after the flush be older than it.
    expect(h.transfers).toEqual([100]);
    // The new name, and every name above it in the zone: an NXDOMAIN there is now NODATA.
    expect(h.evicted).toEqual([[`new.shop.svc.${Z}`, `shop.svc.${Z}`, `svc.${Z}`, Z].sort()]);
    expect(h.sync.zones()).toEqual([{ zone: Z, serial: 101 }]);
    expect(h.sync.isPushed(toFqdn(`x.shop.svc.${Z}`))).toBe(true);
    expect(h.sync.isPushed(toFqdn('example.org'))).toBe(false);
    expect(await h.sync.notify(Z, '127.0.0.1')).toBe('accepted');
    expect(h.transfers).toEqual([100, 101]);
  });

  it('flushes the zone when the server sends it whole, and reports a failed transfer', async () => {
    let next: () => Promise<ZoneChange> = async () => ({ kind: 'full', serial: 150 });
    const h = harness(() => next());
    // Entering push mode flushes, and its first transfer brings the whole zone: flushed again.
    await h.sync.notify(Z, '127.0.0.1');
    expect(h.flushed).toEqual([Z, Z]);
    await h.sync.notify(Z, '127.0.0.1');
    expect(h.flushed).toEqual([Z, Z, Z]);
    next = async () => {
      throw new Error('connection refused');
    };
    expect(await h.sync.notify(Z, '127.0.0.1')).toBe('failed');
    expect(h.sync.zones()).toEqual([{ zone: Z, serial: 150 }]);
  });

  it('runs one transfer at a time: NOTIFYs during one make exactly one more', async () => {
    const releases: Array<() => void> = [];
    let serial = 100;
    const h = harness(
      () =>
        new Promise<ZoneChange>((resolve) => {
          releases.push(() => resolve({ kind: 'incremental', serial: ++serial, names: new Set(), programmed: [] }));
        }),
    );
    const entering = h.sync.notify(Z, '127.0.0.1');
    await expect.poll(() => releases.length).toBe(1);
    releases.shift()?.();
    await entering;
    const first = h.sync.notify(Z, '127.0.0.1');
    const second = h.sync.notify(Z, '127.0.0.1');
    const third = h.sync.notify(Z, '127.0.0.1');
    await expect.poll(() => releases.length).toBe(1);
    releases[0]?.();
    await expect.poll(() => releases.length).toBe(2);
    releases[1]?.();
    expect(await Promise.all([first, second, third])).toEqual(['accepted', 'accepted', 'accepted']);
    expect(h.transfers).toEqual([100, 101, 102]);
  });

  it('catches a lost NOTIFY at the SOA check', async () => {
    const h = harness(async (from) => ({
      kind: 'incremental',
      serial: from + 5,
      names: new Set([toFqdn(`a.b.svc.${Z}`)]),
      programmed: [],
    }));
    await h.sync.notify(Z, '127.0.0.1');
    expect(h.transfers).toEqual([100]);
    h.setSerial(105);
    await h.sync.checkAll();
    expect(h.transfers).toEqual([100]);
    h.setSerial(110);
    await h.sync.checkAll();
    expect(h.transfers).toEqual([100, 105]);
    expect(h.sync.zones()).toEqual([{ zone: Z, serial: 110 }]);
    // An older SOA (a cache behind the server answered it) is no reason to fetch.
    h.setSerial(90);
    await h.sync.checkAll();
    expect(h.transfers).toEqual([100, 105]);
  });

  it('evicts the apex on every change, names or not: its SOA carries the serial', async () => {
    const h = harness(async (from) => ({ kind: 'incremental', serial: from + 1, names: new Set(), programmed: [] }));
    await h.sync.notify(Z, '127.0.0.1');
    expect(h.evicted).toEqual([[Z]]);
  });
});

describe('serialNewer (RFC 1982)', () => {
  it('compares 32-bit serials across the wrap', () => {
    expect(serialNewer(101, 100)).toBe(true);
    expect(serialNewer(100, 101)).toBe(false);
    expect(serialNewer(100, 100)).toBe(false);
    expect(serialNewer(5, 0xffff_fff0)).toBe(true);
    expect(serialNewer(0xffff_fff0, 5)).toBe(false);
  });

  it('node-local mode: a NOTIFY whose fetch finds nothing new fetches again shortly, since another replica may lag the notifier', async () => {
    vi.useFakeTimers();
    try {
      const name = toFqdn(`web.shop.svc.${Z}`);
      const results: ZoneChange[] = [
        { kind: 'up-to-date', serial: 100 },
        { kind: 'up-to-date', serial: 100 },
        { kind: 'up-to-date', serial: 100 },
        { kind: 'incremental', serial: 101, names: new Set([name]), programmed: [] },
      ];
      const h = harness(async () => results.shift() ?? { kind: 'up-to-date', serial: 101 }, {
        recheckAfterMs: [100, 400],
      });
      expect(await h.sync.notify(Z, '127.0.0.1')).toBe('accepted');
      // Entering push mode fetched once (up to date); the replica it reached had not caught up.
      expect(h.transfers).toEqual([100]);
      // The NOTIFY of the change: still nothing new where the fetch lands…
      expect(await h.sync.notify(Z, '127.0.0.1')).toBe('accepted');
      await vi.advanceTimersByTimeAsync(100);
      expect(h.transfers.length).toBe(3);
      // …until the second look, 400 ms on, finds the change.
      await vi.advanceTimersByTimeAsync(400);
      expect(h.transfers.length).toBe(4);
      expect(h.evicted.at(-1)).toContain(name);
      // Found: no look after that.
      await vi.advanceTimersByTimeAsync(5_000);
      expect(h.transfers.length).toBe(4);
    } finally {
      vi.useRealTimers();
    }
  });

  it('times each change it applied from its trigger time to the moment its stale entries were dropped', async () => {
    const clock = 1_700_000_000_000;
    const h = harness(
      async (from) => ({
        kind: 'incremental',
        serial: from + 2,
        names: new Set([toFqdn(`pg.data.svc.${Z}`)]),
        programmed: [
          { kind: 'headless_with_selector', triggerMs: clock - 40 },
          { kind: 'cluster_ip', triggerMs: clock - 3_000 },
        ],
      }),
      { now: () => clock },
    );
    await h.sync.notify(Z, '127.0.0.1');
    const text = (name: string) =>
      h.sync.counts.programming.store
        .values(name)
        .filter((v) => v.metricName.endsWith('_count') || v.metricName.endsWith('_sum'))
        .map((v) => `${v.metricName}{${v.labels.service_kind}} ${v.value}`);
    // Read as the histogram it feeds: one change per kind, 40 ms and 3 s after their triggers.
    expect(text('p').sort()).toEqual(
      [
        'p_count{cluster_ip} 1',
        'p_count{headless_with_selector} 1',
        'p_sum{cluster_ip} 3',
        'p_sum{headless_with_selector} 0.04',
      ].sort(),
    );
  });

  it('hands back the position each reply gave, and with one fetches on any other serial (another replica’s)', async () => {
    const given: Array<string | undefined> = [];
    let reply = 0;
    let serverSerial = 500;
    const sync = createZoneSync({
      serverFor: () => RB,
      allowedSources: () => ['127.0.0.1'],
      transfer: async (_server, _zone, _from, position) => {
        given.push(position?.toString());
        reply++;
        return { kind: 'up-to-date', serial: 500, position: Buffer.from(`p${reply}`) };
      },
      soaSerial: async () => serverSerial,
      evictNames: () => 0,
      flushZone: () => 0,
      log: createSilentLogger(),
    });
    expect(await sync.notify(Z, '127.0.0.1')).toBe('accepted');
    await sync.checkAll();
    expect(given).toEqual([undefined]);
    // A lower serial than held: not newer, yet fetched, since the connection may have reached
    // another replica that counts lower for the same state.
    serverSerial = 400;
    await sync.checkAll();
    expect(given).toEqual([undefined, 'p1']);
  });
});
