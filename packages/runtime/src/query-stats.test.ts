import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { labelledFrom } from './metrics-from.js';
import { HistogramStore, LabelledCounts, registerHistogram, typeIndexOf } from './query-stats.js';

describe('per-query stores, read at scrape time', () => {
  it('counts by numbered and named keys, making the labels once per series', async () => {
    const counts = new LabelledCounts();
    let made = 0;
    const labels = (v: string) => () => {
      made++;
      return { v };
    };
    for (let i = 0; i < 5; i++) counts.inc(3, labels('three'));
    counts.inc(0, labels('zero'));
    counts.inc('x', labels('named'));
    counts.inc('x', labels('named'));
    expect(made).toBe(3);
    expect(counts.entries()).toEqual([
      [{ v: 'zero' }, 1],
      [{ v: 'three' }, 5],
      [{ v: 'named' }, 2],
    ]);
    const registry = new Registry();
    labelledFrom(registry, 'test_total', 'help', ['v'], () => counts.entries());
    counts.inc(3, labels('three'));
    const text = await registry.metrics();
    expect(text).toContain('test_total{v="three"} 6');
    expect(text).toContain('test_total{v="named"} 2');
  });

  it('bumps and records only series that exist, so a query makes no labels closure after the first', () => {
    const counts = new LabelledCounts();
    expect(counts.bump(2)).toBe(false);
    counts.inc(2, () => ({ v: 'two' }));
    expect(counts.bump(2)).toBe(true);
    expect(counts.entries()).toEqual([[{ v: 'two' }, 2]]);
    const store = new HistogramStore([1]);
    expect(store.record(0, 0.5)).toBe(false);
    store.observe(0, () => ({ s: 'a' }), 0.5);
    expect(store.record(0, 2)).toBe(true);
    expect(store.values('h').map((v) => v.value)).toEqual([1, 2, 2.5, 2]);
  });

  it('buckets with each bound inclusive (Prometheus le), cumulated when scraped', async () => {
    const store = new HistogramStore([1, 10]);
    for (const value of [0.5, 1, 5, 10, 11]) store.observe(0, () => ({ s: 'a' }), value);
    const registry = new Registry();
    registerHistogram(registry, 'h', 'help', store);
    const text = await registry.metrics();
    expect(text).toContain('h_bucket{s="a",le="1"} 2');
    expect(text).toContain('h_bucket{s="a",le="10"} 4');
    expect(text).toContain('h_bucket{s="a",le="+Inf"} 5');
    expect(text).toContain('h_sum{s="a"} 27.5');
    expect(text).toContain('h_count{s="a"} 5');
  });

  it('gives query types one index per label, "other" types sharing one', () => {
    const label = (t: number) => (t === 1 ? 'A' : t === 28 ? 'AAAA' : 'other');
    const a = typeIndexOf(1, label);
    expect(typeIndexOf(1, label)).toBe(a);
    expect(typeIndexOf(28, label)).not.toBe(a);
    expect(typeIndexOf(65000, label)).toBe(typeIndexOf(65001, label));
  });
});
