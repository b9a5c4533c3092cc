import { describe, expect, it } from 'vitest';
import { ClientTally, MAX_TALLIED_CLIENTS } from '../isolation/client-tally.js';
import { NamespaceTally } from './namespace-tally.js';

const MAP: Record<string, string> = { '10.0.0.1': 'shop', '10.0.0.2': 'shop', '10.0.0.3': 'data', '10.0.0.4': 'web' };
const namespaceOf = async (client: string) => MAP[client];

describe('queries by namespace, bounded', () => {
  it('adds what each client asked since the last refresh to its namespace; unknown clients apart', async () => {
    const t = new NamespaceTally(10);
    await t.refresh(
      [
        ['10.0.0.1', 3],
        ['10.0.0.2', 2],
        ['10.0.0.3', 1],
        ['192.168.0.9', 4],
      ],
      0,
      namespaceOf,
    );
    expect(new Map(t.series())).toEqual(
      new Map([
        ['shop', 5],
        ['data', 1],
        ['unknown', 4],
      ]),
    );
    await t.refresh([['10.0.0.1', 10]], 0, namespaceOf);
    expect(new Map(t.series()).get('shop')).toBe(12);
  });

  it('gives the first N namespaces a series for good and the rest, and clients past the bound, "other"', async () => {
    const t = new NamespaceTally(2);
    await t.refresh(
      [
        ['10.0.0.1', 1],
        ['10.0.0.3', 1],
        ['10.0.0.4', 5],
      ],
      7,
      namespaceOf,
    );
    expect(new Map(t.series())).toEqual(
      new Map([
        ['shop', 1],
        ['data', 1],
        ['other', 12],
      ]),
    );
  });

  it('sums a client over the workers that saw it, and never takes back (a worker that started again counts from 0)', async () => {
    const t = new NamespaceTally(5);
    await t.refresh(
      [
        ['10.0.0.1', 4],
        ['10.0.0.1', 6],
      ],
      0,
      namespaceOf,
    );
    expect(new Map(t.series()).get('shop')).toBe(10);
    await t.refresh([['10.0.0.1', 6]], 0, namespaceOf);
    expect(new Map(t.series()).get('shop')).toBe(10);
    await t.refresh([['10.0.0.1', 9]], 0, namespaceOf);
    expect(new Map(t.series()).get('shop')).toBe(13);
  });

  it('tallies clients one by one up to the bound, the rest together', () => {
    const tally = new ClientTally();
    for (let i = 0; i < MAX_TALLIED_CLIENTS + 10; i++) tally.count(`10.${i >> 16}.${(i >> 8) & 255}.${i & 255}`);
    tally.count('10.0.0.0');
    expect(tally.entries()).toHaveLength(MAX_TALLIED_CLIENTS);
    expect(tally.overflow).toBe(10);
    expect(new Map(tally.entries()).get('10.0.0.0')).toBe(2);
  });
});
