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

describe('zone sync: NOTIFYs that carry the names changed (node caches)', () => {
  const A = Buffer.alloc(8, 1);
  const FORGER = Buffer.alloc(8, 9);
  const name = (n: string) => toFqdn(`${n}.shop.svc.${Z}`);
  const carried = (from: number, to: number, names: string[], extra: { complete?: boolean; origin?: Buffer } = {}) => ({
    origin: extra.origin ?? A,
    from,
    to,
    complete: extra.complete ?? true,
    names: names.map(name),
  });
  const primed = async () => {
    const h = harness(async (from) => ({ kind: 'up-to-date', serial: from }));
    // The sender's first NOTIFY to a cache carries no names: the cache fetches, then chains on.
    expect(await h.sync.notify(Z, '127.0.0.1', carried(500, 500, [], { complete: false }))).toBe('accepted');
    expect(h.transfers).toEqual([100]);
    h.evicted.length = 0;
    return h;
  };

  it('drops the names of one in step with the last and answers with no transfer', async () => {
    const h = await primed();
    expect(await h.sync.notify(Z, '127.0.0.1', carried(500, 510, ['a', 'b']))).toBe('accepted');
    expect(await h.sync.notify(Z, '127.0.0.1', carried(510, 530, ['c']))).toBe('accepted');
    expect(h.transfers).toEqual([100]);
    expect(h.evicted[0]).toEqual([name('a'), name('b'), `shop.svc.${Z}`, `svc.${Z}`, Z].sort());
    expect(h.evicted[1]).toContain(name('c'));
    expect(h.sync.zones()).toEqual([{ zone: Z, serial: 530 }]);
    expect(h.sync.counts.carried.get('applied')).toBe(2);
  });

  it('times the changes whose trigger times it carried, when applied without a fetch', async () => {
    let t = 1_000_000;
    const h = harness(async (from) => ({ kind: 'up-to-date', serial: from }), { now: () => t });
    await h.sync.notify(Z, '127.0.0.1', carried(500, 500, [], { complete: false }));
    t += 250;
    await h.sync.notify(Z, '127.0.0.1', carried(500, 510, []), [{ kind: 'cluster_ip', triggerMs: 1_000_000 }]);
    const seen = h.sync.counts.programming.store
      .values('p')
      .filter((v) => v.metricName.endsWith('_count') || v.metricName.endsWith('_sum'))
      .map((v) => `${v.metricName}{${v.labels.service_kind}} ${v.value}`);
    expect(seen.sort()).toEqual(['p_count{cluster_ip} 1', 'p_sum{cluster_ip} 0.25']);
  });

  it('takes one sent again after its answer was lost (it starts before the serial held) as in step', async () => {
    const h = await primed();
    await h.sync.notify(Z, '127.0.0.1', carried(500, 510, ['a']));
    // The sender never heard the answer: the next starts from 500 again, and covers 510.
    expect(await h.sync.notify(Z, '127.0.0.1', carried(500, 520, ['a', 'b']))).toBe('accepted');
    expect(h.transfers).toEqual([100]);
    expect(h.sync.zones()).toEqual([{ zone: Z, serial: 520 }]);
  });

  it('fetches when one is out of step, carries too many names, or comes from another sender', async () => {
    const h = await primed();
    await h.sync.notify(Z, '127.0.0.1', carried(520, 530, ['lost-before']));
    expect(h.sync.counts.carried.get('gap')).toBe(1);
    await h.sync.notify(Z, '127.0.0.1', carried(530, 600, [], { complete: false }));
    // The first, which primed the cache, carried none either.
    expect(h.sync.counts.carried.get('incomplete')).toBe(2);
    await h.sync.notify(Z, '127.0.0.1', carried(600, 610, ['b'], { origin: Buffer.alloc(8, 2) }));
    expect(h.transfers).toHaveLength(4);
    // Each out-of-step one's names were dropped too, before the fetch.
    expect(h.evicted.flat()).toContain(name('lost-before'));
  });

  it('a forged NOTIFY that moved the serial held costs a fetch, never a name left stale', async () => {
    const h = await primed();
    // Forged: in step, but far ahead and naming nothing.
    expect(await h.sync.notify(Z, '127.0.0.1', carried(500, 900, []))).toBe('accepted');
    // The sender's own, for what really changed: out of step now, so its names are dropped and
    // the cache fetches.
    await h.sync.notify(Z, '127.0.0.1', carried(500, 510, ['real']));
    expect(h.evicted.flat()).toContain(name('real'));
    expect(h.transfers).toHaveLength(2);
    // A forger with its own origin chains onto nothing.
    await h.sync.notify(Z, '127.0.0.1', carried(510, 520, [], { origin: FORGER }));
    expect(h.transfers).toHaveLength(3);
  });

  it('asks the next transfer from the carried serial only of the process that made the position held', async () => {
    const { encodeZonePosition } = await import('@cluster-dns/wire');
    let origin = A;
    let t = 1_000_000;
    const h = harness(
      async (from) => ({
        kind: 'up-to-date',
        serial: from === 100 ? 200 : from,
        position: encodeZonePosition({ origin, resources: new Map() }),
      }),
      { now: () => t++ },
    );
    await h.sync.notify(Z, '127.0.0.1', carried(500, 500, [], { complete: false }));
    await h.sync.notify(Z, '127.0.0.1', carried(500, 520, ['a']));
    h.setSerial(999);
    // Kept by its NOTIFYs since the last check: no SOA query, no fetch.
    await h.sync.checkAll();
    expect(h.transfers).toHaveLength(1);
    // None since: the SOA check finds another serial and fetches, from 520, A's own serial, since
    // A made the position held; that reply's position is another process's.
    origin = Buffer.alloc(8, 3);
    await h.sync.checkAll();
    expect(h.transfers.at(-1)).toBe(520);
    await h.sync.notify(Z, '127.0.0.1', carried(520, 540, ['b']));
    await h.sync.checkAll();
    h.setSerial(1000);
    await h.sync.checkAll();
    // The serial the last transfer gave (520), not A's 540: the position's maker never saw 540.
    expect(h.transfers.at(-1)).toBe(520);
    expect(h.transfers).toHaveLength(3);
  });
});
