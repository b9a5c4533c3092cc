import type { Buffer } from 'node:buffer';
import { decodeNotifyChanges, decodeProgrammingTimes, toFqdn } from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import { createNotifyChanges } from './notify-changes.js';
import { createTestZone, group, svc } from './test-zone.js';

const Z = toFqdn('cluster.local');

function zoneWith(services: number) {
  const t = createTestZone({ journalBytes: 1 << 22 });
  const start = t.state.serial;
  for (let i = 0; i < services; i++)
    t.state.upsertService(svc('team', `service-number-${i}`, { clusterIPs: [`10.96.${i >> 8}.${i & 255}`] }));
  return { t, start };
}

describe('what a NOTIFY to node caches carries', () => {
  it('the names changed since the serial the cache answered, made once for every cache at it', () => {
    const { t, start } = zoneWith(3);
    const changes = createNotifyChanges(t.view);
    const first = changes(Z, start, t.state.serial);
    expect(first.complete).toBe(true);
    expect(first.to).toBe(t.state.serial);
    const carried = decodeNotifyChanges(first.data, Z);
    expect([...(carried?.names ?? [])].sort()).toEqual(
      [0, 1, 2].map((i) => `service-number-${i}.team.svc.${Z}`).sort(),
    );
    expect(carried?.origin.equals(t.state.clock.origin)).toBe(true);
    // The same answer for the next cache at that serial: the same bytes, not made again.
    expect(changes(Z, start, t.state.serial)).toBe(first);
    // Nothing since: complete, no names.
    expect(decodeNotifyChanges(changes(Z, t.state.serial, t.state.serial).data, Z)?.names).toEqual([]);
  });

  it('when not all fit, the oldest changes that do, to their serial; the rest in the next', () => {
    const { t, start } = zoneWith(120);
    const changes = createNotifyChanges(t.view);
    const part = changes(Z, start, t.state.serial);
    expect(part.complete).toBe(true);
    expect(part.to).not.toBe(t.state.serial);
    const names = new Set(decodeNotifyChanges(part.data, Z)?.names);
    expect(names.size).toBeGreaterThan(10);
    expect(names.size).toBeLessThan(120);
    expect(names.has(toFqdn(`service-number-0.team.svc.${Z}`))).toBe(true);
    // From there on, until every change was carried, each of them once at least.
    let from = part.to;
    for (let i = 0; i < 20 && from !== t.state.serial; i++) {
      const next = changes(Z, from, t.state.serial);
      for (const name of decodeNotifyChanges(next.data, Z)?.names ?? []) names.add(name);
      from = next.to;
    }
    expect(from).toBe(t.state.serial);
    for (let i = 0; i < 120; i++) expect(names.has(toFqdn(`service-number-${i}.team.svc.${Z}`))).toBe(true);
  });

  it('carries none, so the cache fetches, for a cache never answered or from before the journal', () => {
    const { t } = zoneWith(2);
    const changes = createNotifyChanges(t.view);
    expect(changes(Z, undefined, t.state.serial).complete).toBe(false);
    expect(changes(Z, 12345, t.state.serial).complete).toBe(false);
  });

  it('times the EndpointSlice changes it carries, in the cluster zone’s NOTIFY only', () => {
    const { t, start } = zoneWith(0);
    t.state.upsertService(svc('team', 'api', { clusterIPs: ['10.96.0.9'] }));
    t.state.upsertGroup({ ...group('team', 'api', [{ ip: '10.244.2.1' }]), triggerTimeMs: 1_700_000_000_200 });
    t.state.upsertGroup({ ...group('team', 'api', [{ ip: '10.244.2.2' }]), triggerTimeMs: 1_700_000_000_300 });
    const changes = createNotifyChanges(t.view);
    const made = changes(Z, start, t.state.serial);
    expect(decodeProgrammingTimes(made.times as Buffer)).toEqual([
      { kind: 'cluster_ip', triggerMs: 1_700_000_000_200 },
      { kind: 'cluster_ip', triggerMs: 1_700_000_000_300 },
    ]);
    expect(changes(toFqdn('in-addr.arpa'), start, t.state.serial).times).toBeUndefined();
  });
});
