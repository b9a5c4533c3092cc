import type { Registry } from 'prom-client';

/**
 * Per-query counts kept in plain numbers and turned into Prometheus series only when scraped.
 * prom-client hashes the label set on every `inc`/`observe`, even through a bound child: on the
 * cache-hit path that cost a third of the forwarder's throughput (bench case 1: 13 → 20 µs of CPU
 * per hit), and in the record-builder its label hashes were most of a query's garbage. Here a
 * query costs an array or map lookup and a few additions, and allocates nothing.
 */
export class LabelledCounts {
  private readonly named = new Map<string, Series>();
  /** Series keyed by a small number: an array slot, which costs less per query than a Map's hash. */
  private readonly numbered: Array<Series | undefined> = [];

  /**
   * Adds one to the series `key` (a cheap string the caller builds, or better a small number: no
   * string made or hashed per query), made with `labels()` once.
   */
  inc(key: string | number, labels: () => Record<string, string>): void {
    const entry = typeof key === 'number' ? this.numbered[key] : this.named.get(key);
    if (entry) entry.value++;
    else if (typeof key === 'number') this.numbered[key] = { labels: labels(), value: 1 };
    else this.named.set(key, { labels: labels(), value: 1 });
  }

  /**
   * Adds one to the numbered series `key` if it exists, else returns false (the caller then calls
   * `inc` with its labels): the per-query path allocates no closure for labels it already gave.
   */
  bump(key: number): boolean {
    const entry = this.numbered[key];
    if (entry === undefined) return false;
    entry.value++;
    return true;
  }

  entries(): Array<[Record<string, string>, number]> {
    const all = [...this.numbered.filter((e) => e !== undefined), ...this.named.values()];
    return all.map((e) => [e.labels, e.value]);
  }

  /** Every series as another thread's counts (entries()), replacing these: a lane's, shown by the pool. */
  restore(entries: ReadonlyArray<readonly [Record<string, string>, number]>): void {
    this.numbered.length = 0;
    this.named.clear();
    for (let i = 0; i < entries.length; i++) {
      const [labels, value] = entries[i] as readonly [Record<string, string>, number];
      this.named.set(String(i), { labels, value });
    }
  }
}

interface Series {
  labels: Record<string, string>;
  value: number;
}

/** CoreDNS's request duration buckets: 0.25 ms doubling to 8.192 s. */
export const COREDNS_DURATION_BUCKETS: readonly number[] = Array.from({ length: 16 }, (_, k) => 0.00025 * 2 ** k);

/** A histogram per label set, bucketed by hand; `registerHistogram` shows it to a registry. */
export class HistogramStore {
  private readonly named = new Map<string, HistogramSeries>();
  private readonly numbered: Array<HistogramSeries | undefined> = [];

  constructor(readonly bounds: readonly number[] = COREDNS_DURATION_BUCKETS) {}

  observe(key: string | number, labels: () => Record<string, string>, value: number): void {
    let s = typeof key === 'number' ? this.numbered[key] : this.named.get(key);
    if (!s) {
      s = { labels: labels(), buckets: new Float64Array(this.bounds.length + 1), sum: 0 };
      if (typeof key === 'number') this.numbered[key] = s;
      else this.named.set(key, s);
    }
    this.add(s, value);
  }

  /** `observe` for a numbered series that exists; false when it does not yet (as LabelledCounts.bump). */
  record(key: number, value: number): boolean {
    const s = this.numbered[key];
    if (s === undefined) return false;
    this.add(s, value);
    return true;
  }

  private add(s: HistogramSeries, value: number): void {
    // Buckets hold their own counts; cumulated when scraped. Few bounds: a linear walk is fastest.
    let i = 0;
    while (i < this.bounds.length && value > (this.bounds[i] as number)) i++;
    s.buckets[i] = (s.buckets[i] as number) + 1;
    s.sum += value;
  }

  /** Every series as plain data, for another thread to restore() and show. */
  snapshot(): HistogramSnapshot {
    return [...this.numbered.filter((e) => e !== undefined), ...this.named.values()].map((s) => ({
      labels: s.labels,
      buckets: [...s.buckets],
      sum: s.sum,
    }));
  }

  /** Replaces every series with a snapshot() of another thread's store (same bounds). */
  restore(snapshot: HistogramSnapshot): void {
    this.numbered.length = 0;
    this.named.clear();
    for (let i = 0; i < snapshot.length; i++) {
      const s = snapshot[i] as HistogramSnapshot[number];
      this.named.set(String(i), { labels: s.labels, buckets: Float64Array.from(s.buckets), sum: s.sum });
    }
  }

  /** The series in Prometheus's form, cumulated, for a metric called `name`. */
  values(name: string): Array<{ metricName: string; labels: Record<string, string | number>; value: number }> {
    const out: Array<{ metricName: string; labels: Record<string, string | number>; value: number }> = [];
    for (const s of [...this.numbered.filter((e) => e !== undefined), ...this.named.values()]) {
      let cumulative = 0;
      this.bounds.forEach((le, i) => {
        cumulative += s.buckets[i] as number;
        out.push({ metricName: `${name}_bucket`, labels: { ...s.labels, le }, value: cumulative });
      });
      cumulative += s.buckets[this.bounds.length] as number;
      out.push({ metricName: `${name}_bucket`, labels: { ...s.labels, le: '+Inf' }, value: cumulative });
      out.push({ metricName: `${name}_sum`, labels: s.labels, value: s.sum });
      out.push({ metricName: `${name}_count`, labels: s.labels, value: cumulative });
    }
    return out;
  }
}

/** A HistogramStore's series as plain data (structured-clonable). */
export type HistogramSnapshot = Array<{ labels: Record<string, string>; buckets: number[]; sum: number }>;

interface HistogramSeries {
  labels: Record<string, string>;
  buckets: Float64Array;
  sum: number;
}

/** Exposes a HistogramStore to the registry as the histogram `name`, read at scrape time. */
export function registerHistogram(registry: Registry, name: string, help: string, store: HistogramStore): void {
  registry.registerMetric({
    name,
    help,
    type: 'histogram',
    aggregator: 'sum',
    get: async () => ({ name, help, type: 'histogram', aggregator: 'sum', values: store.values(name) }),
    reset: () => {},
  } as unknown as Parameters<Registry['registerMetric']>[0]);
}

const typeIndexes = new Int32Array(65536).fill(-1);
const typeNames: string[] = [];
/**
 * A query type's metric label as a small number (the same for every type labelled "other"): what
 * a per-query series is keyed by, without a string made or hashed per query.
 */
export function typeIndexOf(qtype: number, label: (qtype: number) => string): number {
  let index = typeIndexes[qtype] as number;
  if (index < 0) {
    const name = label(qtype);
    index = typeNames.indexOf(name);
    if (index < 0) index = typeNames.push(name) - 1;
    typeIndexes[qtype] = index;
  }
  return index;
}
