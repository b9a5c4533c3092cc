import { createSilentLogger } from '@cluster-dns/runtime';
import { type DnsServer, decodeMessage, toFqdn } from '@cluster-dns/wire';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createNotifier } from './notifier.js';

const target: DnsServer = { host: '127.0.0.1', port: 53 };
const ack = (query: Buffer) => {
  const reply = Buffer.from(query);
  reply.writeUInt16BE(reply.readUInt16BE(2) | 0x8000, 2);
  return reply;
};

/** A notifier whose NOTIFYs the test answers (or not) by hand. */
function notifierUnderTest(minIntervalMs = 0) {
  let serial = 1;
  const sent: Array<{ resolve: (reply: Buffer) => void; reject: (error: Error) => void; query: Buffer }> = [];
  const acked: number[] = [];
  const notifier = createNotifier({
    targets: [target],
    zones: [toFqdn('cluster.local')],
    serial: () => serial,
    send: (_t, query) => new Promise((resolve, reject) => sent.push({ resolve, reject, query })),
    log: createSilentLogger(),
    retryBaseMs: 1000,
    retryMaxMs: 8000,
    minIntervalMs,
    hooks: { onAcked: (_t, _z, ms) => acked.push(ms) },
  });
  return {
    notifier,
    sent,
    acked,
    change: () => {
      serial++;
      notifier.changed(Date.now());
    },
    answer: async (i: number) => {
      const s = sent[i];
      s?.resolve(ack(s.query));
      await vi.advanceTimersByTimeAsync(0);
    },
    fail: async (i: number) => {
      sent[i]?.reject(new Error('timeout'));
      await vi.advanceTimersByTimeAsync(0);
    },
  };
}

afterEach(() => {
  vi.useRealTimers();
});

describe('NOTIFY sender', () => {
  it('sends one NOTIFY for a burst of changes, and one more after the answer when the serial moved', async () => {
    vi.useFakeTimers();
    const n = notifierUnderTest();
    n.notifier.start();
    expect(n.sent).toHaveLength(1);
    await n.answer(0);
    n.change();
    n.change();
    n.change();
    expect(n.sent).toHaveLength(2);
    await n.answer(1);
    // The second and third changes came while the second NOTIFY was out.
    expect(n.sent).toHaveLength(3);
    await n.answer(2);
    expect(n.sent).toHaveLength(3);
    expect(n.notifier.unacknowledged()).toBe(0);
    n.notifier.stop();
  });

  it('retries an unanswered NOTIFY with doubling backoff, and a change cuts the wait short', async () => {
    vi.useFakeTimers();
    const n = notifierUnderTest();
    n.notifier.start();
    await n.fail(0);
    await vi.advanceTimersByTimeAsync(999);
    expect(n.sent).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(n.sent).toHaveLength(2);
    await n.fail(1);
    // Backing off 2 s now; a change must not wait for it (a receiver that just came up).
    await vi.advanceTimersByTimeAsync(100);
    n.change();
    expect(n.sent).toHaveLength(3);
    await n.answer(2);
    expect(n.notifier.unacknowledged()).toBe(0);
    // No retry left behind once answered.
    await vi.advanceTimersByTimeAsync(10_000);
    expect(n.sent).toHaveLength(3);
    n.notifier.stop();
  });

  it('times the whole propagation from the oldest change the answer covers', async () => {
    vi.useFakeTimers();
    const n = notifierUnderTest();
    n.notifier.start();
    await n.answer(0);
    n.change();
    await vi.advanceTimersByTimeAsync(40);
    await n.answer(1);
    expect(n.acked).toEqual([40]);
    n.notifier.stop();
  });

  it('with minIntervalMs, sends at most one NOTIFY per interval however fast the changes come', async () => {
    vi.useFakeTimers();
    const n = notifierUnderTest(100);
    n.notifier.start();
    await n.answer(0);
    // 100 changes over one second, each answered at once: ten NOTIFYs, not a hundred.
    for (let i = 0; i < 100; i++) {
      n.change();
      await vi.advanceTimersByTimeAsync(10);
      if (n.sent.length > 0) await n.answer(n.sent.length - 1);
    }
    await vi.advanceTimersByTimeAsync(200);
    await n.answer(n.sent.length - 1);
    expect(n.sent.length).toBeGreaterThanOrEqual(10);
    expect(n.sent.length).toBeLessThanOrEqual(12);
    // The last one covers the last change: nothing is left unacknowledged.
    expect(n.notifier.unacknowledged()).toBe(0);
    n.notifier.stop();
  });

  it('setTargets: a target added is NOTIFYed at once, one removed is never sent to again, its retry cancelled', async () => {
    vi.useFakeTimers();
    const sentTo: string[] = [];
    const pending: Array<(reply: Buffer) => void> = [];
    const failing = new Set<string>();
    const notifier = createNotifier({
      targets: [],
      zones: [toFqdn('cluster.local')],
      serial: () => 1,
      send: (t, query) =>
        new Promise((resolve, reject) => {
          sentTo.push(t.host);
          if (failing.has(t.host)) reject(new Error('timeout'));
          else pending.push(() => resolve(ack(query)));
        }),
      log: createSilentLogger(),
      retryBaseMs: 1000,
    });
    notifier.setTargets([{ host: '10.0.0.1', port: 9354 }]);
    // Not started yet (not ready): nothing goes out.
    expect(sentTo).toEqual([]);
    notifier.start();
    expect(sentTo).toEqual(['10.0.0.1']);
    failing.add('10.0.0.2');
    notifier.setTargets([
      { host: '10.0.0.1', port: 9354 },
      { host: '10.0.0.2', port: 9354 },
    ]);
    // The new one at once; the kept one is not sent to again for being kept.
    expect(sentTo).toEqual(['10.0.0.1', '10.0.0.2']);
    await vi.advanceTimersByTimeAsync(0);
    notifier.setTargets([{ host: '10.0.0.1', port: 9354 }]);
    await vi.advanceTimersByTimeAsync(60_000);
    // 10.0.0.2's retry (1 s later) never went.
    expect(sentTo).toEqual(['10.0.0.1', '10.0.0.2']);
    expect(notifier.unacknowledged()).toBe(1);
    for (const answer of pending.splice(0)) answer(Buffer.alloc(0));
    await vi.advanceTimersByTimeAsync(0);
    expect(notifier.unacknowledged()).toBe(0);
    notifier.stop();
  });

  it('notifies only the zones that changed, and counts a zone not changed as up to date', async () => {
    vi.useFakeTimers();
    let serial = 1;
    const sent: Array<{ zone: string; resolve: () => void }> = [];
    const [cluster, inAddr] = [toFqdn('cluster.local'), toFqdn('in-addr.arpa')];
    const notifier = createNotifier({
      targets: [target],
      zones: [cluster, inAddr],
      serial: () => serial,
      send: (_t, query) =>
        new Promise((resolve) =>
          sent.push({ zone: decodeMessage(query).questions[0]?.name ?? '', resolve: () => resolve(ack(query)) }),
        ),
      log: createSilentLogger(),
    });
    notifier.start();
    for (const s of sent.splice(0)) s.resolve();
    await vi.advanceTimersByTimeAsync(0);
    expect(notifier.unacknowledged()).toBe(0);
    serial++;
    notifier.changed(Date.now(), [cluster]);
    expect(sent.map((s) => s.zone)).toEqual([cluster]);
    for (const s of sent.splice(0)) s.resolve();
    await vi.advanceTimersByTimeAsync(0);
    // in-addr.arpa was acknowledged at serial 1 and has not changed since: nothing more to send.
    expect(sent).toEqual([]);
    expect(notifier.unacknowledged()).toBe(0);
    serial++;
    notifier.changed(Date.now(), [inAddr]);
    expect(sent.map((s) => s.zone)).toEqual([inAddr]);
    expect(notifier.unacknowledged()).toBe(1);
    notifier.stop();
  });

  it('a zone the target refuses is not retried nor sent at each change, only offered again at the heartbeat', async () => {
    vi.useFakeTimers();
    const sent: string[] = [];
    const [cluster, clusterset] = [toFqdn('cluster.local'), toFqdn('clusterset.local')];
    let serial = 1;
    const notifier = createNotifier({
      targets: [target],
      zones: [cluster, clusterset],
      serial: () => serial,
      send: async (_t, query) => {
        const zone = decodeMessage(query).questions[0]?.name ?? '';
        sent.push(zone);
        if (zone !== clusterset) return ack(query);
        const refused = ack(query);
        refused.writeUInt16BE(refused.readUInt16BE(2) | 5, 2);
        return refused;
      },
      log: createSilentLogger(),
      retryBaseMs: 100,
      heartbeatMs: 30_000,
    });
    notifier.start();
    await vi.advanceTimersByTimeAsync(10_000);
    // Once each: the refusal is not retried, and counts as nothing left to acknowledge.
    expect(sent.sort()).toEqual([cluster, clusterset]);
    expect(notifier.unacknowledged()).toBe(0);
    serial++;
    notifier.changed(Date.now(), [cluster, clusterset]);
    await vi.advanceTimersByTimeAsync(0);
    expect(sent.slice(2)).toEqual([cluster]);
    await vi.advanceTimersByTimeAsync(20_000);
    expect(sent.filter((z) => z === clusterset)).toHaveLength(2);
    notifier.stop();
  });
});

describe('NOTIFY sender to node caches: windows, the names carried, fetches a few at a time', () => {
  const zone = toFqdn('cluster.local');
  function fleet(count: number, extra: { maxFetching?: number; maxPerSecond?: number } = {}) {
    let serial = 10;
    const made: Array<{ from: number | undefined; to: number }> = [];
    const sent: Array<{ target: DnsServer; query: Buffer; resolve: (b: Buffer) => void }> = [];
    const targets = Array.from({ length: count }, (_, i) => ({ host: '127.0.0.1', port: 1000 + i }));
    const notifier = createNotifier({
      targets,
      zones: [zone],
      serial: () => serial,
      send: (t, query) => new Promise((resolve) => sent.push({ target: t, query, resolve })),
      // Complete once a target has answered one: the first makes every target fetch.
      changes: (_z, from, to) => {
        made.push({ from, to });
        return { data: Buffer.from([from === undefined ? 0 : 1]), complete: from !== undefined, to };
      },
      log: createSilentLogger(),
      minIntervalMs: 100,
      ...extra,
    });
    const answerAll = async () => {
      for (const s of sent.splice(0)) s.resolve(ack(s.query));
      await vi.advanceTimersByTimeAsync(0);
    };
    return {
      notifier,
      sent,
      made,
      answerAll,
      change: () => {
        serial++;
        notifier.changed(Date.now());
      },
    };
  }

  it('sends to the fleet in one window at one serial, so the changes are made once per serial answered', async () => {
    vi.useFakeTimers();
    const f = fleet(200);
    f.notifier.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(f.sent).toHaveLength(200);
    await f.answerAll();
    f.change();
    await vi.advanceTimersByTimeAsync(0);
    // Sent in slices, a loop turn apart, while changes go on: still one serial for the window.
    f.change();
    await vi.advanceTimersByTimeAsync(5);
    expect(f.sent).toHaveLength(200);
    const window = f.made.slice(-200);
    expect(new Set(window.map((m) => `${m.from}>${m.to}`))).toEqual(new Set(['10>11']));
    await f.answerAll();
    // The next window waits out the interval, then covers the second change.
    expect(f.sent).toHaveLength(0);
    await vi.advanceTimersByTimeAsync(100);
    expect(f.sent).toHaveLength(200);
    expect(f.made.at(-1)).toEqual({ from: 11, to: 12 });
  });

  it('grows the window with the fleet: at most maxPerSecond NOTIFYs a second', async () => {
    vi.useFakeTimers();
    const f = fleet(500, { maxPerSecond: 1000 });
    f.notifier.start();
    await vi.advanceTimersByTimeAsync(0);
    await f.answerAll();
    f.change();
    // Every slice of the window (a loop turn each).
    for (let i = 0; i < 10; i++) await vi.advanceTimersByTimeAsync(1);
    expect(f.sent).toHaveLength(500);
    await f.answerAll();
    f.change();
    // 500 a window at 1,000 a second: the next goes half a second after the last, not 100 ms.
    await vi.advanceTimersByTimeAsync(380);
    expect(f.sent).toHaveLength(0);
    await vi.advanceTimersByTimeAsync(120);
    expect(f.sent).toHaveLength(500);
  });

  it('makes at most maxFetching targets fetch at once; the rest follow as their fetches end', async () => {
    vi.useFakeTimers();
    const f = fleet(100, { maxFetching: 8 });
    f.notifier.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(f.sent).toHaveLength(8);
    let answered = 0;
    while (answered < 100) {
      const batch = f.sent.length;
      expect(batch).toBeGreaterThan(0);
      expect(batch).toBeLessThanOrEqual(8);
      answered += batch;
      await f.answerAll();
      await vi.advanceTimersByTimeAsync(100);
    }
    expect(f.notifier.unacknowledged()).toBe(0);
  });

  it('on handOver makes every target fetch once, a few at a time, then carries names again', async () => {
    vi.useFakeTimers();
    const f = fleet(40, { maxFetching: 8 });
    f.notifier.start();
    await vi.advanceTimersByTimeAsync(0);
    while (f.sent.length) {
      await f.answerAll();
      await vi.advanceTimersByTimeAsync(100);
    }
    f.change();
    await vi.advanceTimersByTimeAsync(100);
    await f.answerAll();
    expect(f.made.at(-1)?.from).toBe(10);
    const before = f.made.length;
    f.notifier.handOver();
    await vi.advanceTimersByTimeAsync(100);
    // Told to fetch (no serial answered, so no names): eight at once, each next as one ends.
    expect(f.sent).toHaveLength(8);
    expect(f.made.slice(before).every((m) => m.from === undefined)).toBe(true);
    let fetched = 0;
    while (f.sent.length) {
      fetched += f.sent.length;
      await f.answerAll();
    }
    expect(fetched).toBe(40);
    f.change();
    await vi.advanceTimersByTimeAsync(100);
    expect(f.sent).toHaveLength(40);
    expect(f.made.at(-1)?.from).toBe(11);
  });
});
