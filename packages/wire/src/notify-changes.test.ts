import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import { toFqdn } from './fqdn.js';
import { carriesEveryName, decodeNotifyChanges, encodeNotifyChanges } from './notify-changes.js';

const Z = toFqdn('cluster.local');
const origin = Buffer.from('0102030405060708', 'hex');

describe('the names a NOTIFY carries (EDNS option 65055)', () => {
  it('reads back what it wrote: serials, origin, the apex and names sharing tails', () => {
    const names = [
      toFqdn(`web.shop.svc.${Z}`),
      toFqdn(`_http._tcp.web.shop.svc.${Z}`),
      toFqdn(`db.shop.svc.${Z}`),
      Z,
      toFqdn(`a\\.b.shop.svc.${Z}`),
    ];
    const data = encodeNotifyChanges({ origin, from: 0xfffffff0, to: 5, complete: true, names }, Z);
    const back = decodeNotifyChanges(data, Z);
    expect(back).toEqual({ origin, from: 0xfffffff0, to: 5, complete: true, names });
    expect(carriesEveryName(data)).toBe(true);
    // The shared tails are pointers: far less than every name written out.
    const plain = names.reduce((n, name) => n + name.length - Z.length + 1, 0);
    expect(data.length - 18).toBeLessThan(plain * 0.75);
  });

  it('sends none and says so when they do not all fit: half a list could not be told from all of it', () => {
    const names = Array.from({ length: 200 }, (_, i) => toFqdn(`service-${i}.team-${i}.svc.${Z}`));
    const data = encodeNotifyChanges({ origin, from: 1, to: 2, complete: true, names }, Z, 1100);
    expect(data.length).toBe(18);
    expect(decodeNotifyChanges(data, Z)).toMatchObject({ complete: false, names: [] });
    expect(carriesEveryName(data)).toBe(false);
  });

  it('reads nothing from data it cannot trust: short, another version, a name running out, a pointer forward', () => {
    const good = encodeNotifyChanges({ origin, from: 1, to: 2, complete: true, names: [toFqdn(`a.${Z}`)] }, Z);
    expect(decodeNotifyChanges(good.subarray(0, 10), Z)).toBeUndefined();
    expect(decodeNotifyChanges(Buffer.concat([Buffer.from([2]), good.subarray(1)]), Z)).toBeUndefined();
    expect(decodeNotifyChanges(good.subarray(0, good.length - 1), Z)).toBeUndefined();
    const forward = Buffer.concat([good.subarray(0, 18), Buffer.from([0xc0, 30])]);
    expect(decodeNotifyChanges(forward, Z)).toBeUndefined();
  });
});
