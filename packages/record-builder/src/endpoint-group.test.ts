import { describe, expect, it } from 'vitest';
import {
  addressesOf,
  endpointLabel,
  hasAddress,
  hasHostname,
  hasLabel,
  hostnameOf,
  packEndpointGroup,
  reuseUnchanged,
} from './endpoint-group.js';

const meta = { namespace: 'shop', name: 'db-abc', serviceName: 'db', ports: [] };
const endpoint = (addresses: string[], hostname?: string, ready = true) => ({
  addresses,
  ready,
  terminating: false,
  hostname,
});

describe('endpoint groups: endpoints packed into arrays and two strings', () => {
  const group = packEndpointGroup(meta, [
    endpoint(['10.244.1.5'], 'db-0'),
    endpoint([]), // no address: left out
    endpoint(['10.244.1.6', '10.244.1.60']),
    endpoint(['fd00::7'], 'db-2'),
  ]);

  it('gives back each endpoint’s addresses and hostname, in order', () => {
    expect(group.count).toBe(3);
    expect([0, 1, 2].map((i) => addressesOf(group, i))).toEqual([
      ['10.244.1.5'],
      ['10.244.1.6', '10.244.1.60'],
      ['fd00::7'],
    ]);
    expect([0, 1, 2].map((i) => hostnameOf(group, i))).toEqual(['db-0', undefined, 'db-2']);
    expect([0, 1, 2].map((i) => hasHostname(group, i))).toEqual([true, false, true]);
  });

  it('labels an endpoint by its hostname, or by its first address with dashes', () => {
    expect([0, 1, 2].map((i) => endpointLabel(group, i))).toEqual(['db-0', '10-244-1-6', 'db-2']);
    expect(hasLabel(group, 0, 'db-0')).toBe(true);
    // A prefix of the hostname, or one running into the next endpoint's, is not the label.
    expect(hasLabel(group, 0, 'db-')).toBe(false);
    expect(hasLabel(group, 0, 'db-0d')).toBe(false);
    expect(hasLabel(group, 1, '10-244-1-6')).toBe(true);
    expect(hasLabel(group, 2, 'db-2')).toBe(true);
    expect(hasLabel(group, 2, 'db-0')).toBe(false);
  });

  it('matches an address whole, not a prefix of a longer one', () => {
    expect(hasAddress(group, 1, '10.244.1.6')).toBe(true);
    expect(hasAddress(group, 1, '10.244.1.60')).toBe(true);
    expect(hasAddress(group, 0, '10.244.1.6')).toBe(false);
    expect(hasAddress(group, 1, '10.244.1.5')).toBe(false);
    expect(hasAddress(group, 2, 'fd00::7')).toBe(true);
    // An address that begins another, or runs on into the next endpoint's text.
    const near = packEndpointGroup(meta, [endpoint(['10.0.0.1']), endpoint(['1.2.3.4']), endpoint(['10.0.0.10'])]);
    expect(hasAddress(near, 0, '10.0.0.11')).toBe(false);
    expect(hasAddress(near, 2, '10.0.0.1')).toBe(false);
    expect(hasAddress(near, 2, '10.0.0.10')).toBe(true);
  });

  it('has no hostname arrays when no endpoint has a hostname', () => {
    const plain = packEndpointGroup(meta, [endpoint(['10.0.0.1']), endpoint(['10.0.0.2'])]);
    expect(plain.hostnameAt).toBeUndefined();
    expect(hostnameOf(plain, 0)).toBeUndefined();
    expect(endpointLabel(plain, 1)).toBe('10-0-0-2');
  });
});

describe('endpoint groups: an update reuses the texts it did not change, never stale offsets', () => {
  const before = packEndpointGroup(meta, [endpoint(['10.0.0.1'], 'a'), endpoint(['10.0.0.2'], 'b')]);

  it('a readiness flip takes the new flags, with the same addresses and hostnames', () => {
    const next = reuseUnchanged(
      before,
      packEndpointGroup(meta, [endpoint(['10.0.0.1'], 'a'), endpoint(['10.0.0.2'], 'b', false)]),
    );
    expect([next.flags[0], next.flags[1]]).toEqual([before.flags[0], 0]);
    expect([addressesOf(next, 0), addressesOf(next, 1)]).toEqual([['10.0.0.1'], ['10.0.0.2']]);
    expect([hostnameOf(next, 0), hostnameOf(next, 1)]).toEqual(['a', 'b']);
  });

  it('a moved address or a renamed endpoint is taken, with the offsets that go with it', () => {
    const moved = reuseUnchanged(
      before,
      packEndpointGroup(meta, [endpoint(['10.0.0.1'], 'a'), endpoint(['10.0.0.22'], 'b')]),
    );
    expect(addressesOf(moved, 1)).toEqual(['10.0.0.22']);
    expect(hostnameOf(moved, 1)).toBe('b');
    // Same text, other boundaries: "10.0.0.1" + "10.0.0.2" against "10.0.0.11" + "0.0.0.2".
    const shifted = reuseUnchanged(
      before,
      packEndpointGroup(meta, [endpoint(['10.0.0.11'], 'a'), endpoint(['0.0.0.2'], 'b')]),
    );
    expect([addressesOf(shifted, 0), addressesOf(shifted, 1)]).toEqual([['10.0.0.11'], ['0.0.0.2']]);
    const renamed = reuseUnchanged(
      before,
      packEndpointGroup(meta, [endpoint(['10.0.0.1'], 'ab'), endpoint(['10.0.0.2'])]),
    );
    expect([hostnameOf(renamed, 0), hostnameOf(renamed, 1)]).toEqual(['ab', undefined]);
    expect(addressesOf(renamed, 1)).toEqual(['10.0.0.2']);
  });
});

describe('endpoint groups: one buffer under the arrays', () => {
  it('keeps every array in one buffer, without overlap, across a structured clone', () => {
    const group = structuredClone(
      packEndpointGroup(meta, [endpoint(['10.0.0.1', 'fd00::1'], 'a', false), endpoint(['10.0.0.2'], 'b')]),
    );
    const arrays = [group.starts, group.addressAt, group.hostnameAt, group.flags];
    for (const a of arrays) expect(a?.buffer).toBe(group.starts.buffer);
    const spans = arrays.map((a) => [a?.byteOffset ?? 0, (a?.byteOffset ?? 0) + (a?.byteLength ?? 0)]);
    for (let i = 1; i < spans.length; i++) expect(spans[i]?.[0]).toBeGreaterThanOrEqual(spans[i - 1]?.[1] ?? 0);
    expect([addressesOf(group, 0), addressesOf(group, 1)]).toEqual([['10.0.0.1', 'fd00::1'], ['10.0.0.2']]);
    expect([hostnameOf(group, 0), hostnameOf(group, 1), group.flags[0], group.flags[1]]).toEqual(['a', 'b', 0, 1]);
  });
});
