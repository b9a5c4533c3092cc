import { Counter, Gauge, type Registry } from 'prom-client';

// Metrics whose values live elsewhere (a stage's counts, a store's sizes) and are read when
// Prometheus scrapes, so the code that counts pays a plain increment and nothing else.

/**
 * A counter whose value is read from `read()` at scrape time (it only ever grows). `aggregator`:
 * how it combines over worker threads (default summed; `max` for a count every worker makes alike).
 */
export function counterFrom(
  registry: Registry,
  name: string,
  help: string,
  read: () => number,
  aggregator: 'sum' | 'max' = 'sum',
): void {
  let seen = 0;
  new Counter({
    name,
    help,
    aggregator,
    registers: [registry],
    collect() {
      const now = read();
      if (now > seen) this.inc(now - seen);
      seen = now;
    },
  });
}

/**
 * A labelled counter read from `read()` at scrape time: each label set's value only ever grows. A
 * label set read is exposed from its first read, at 0 if so: `rate()` and an alert on it then see
 * a series from the start, not one that appears with its first increment.
 */
export function labelledFrom(
  registry: Registry,
  name: string,
  help: string,
  labelNames: string[],
  read: () => Iterable<[Record<string, string>, number]>,
): void {
  const seen = new Map<string, number>();
  new Counter({
    name,
    help,
    labelNames,
    registers: [registry],
    collect() {
      for (const [labels, now] of read()) {
        const key = JSON.stringify(labels);
        const before = seen.get(key) ?? 0;
        if (now > before || !seen.has(key)) this.labels(labels).inc(Math.max(0, now - before));
        seen.set(key, now);
      }
    },
  });
}

/**
 * A labelled gauge read from `read()` at scrape time. `aggregator`: how prom-client's
 * AggregatorRegistry combines it over worker threads (default: summed).
 */
export function gaugeFrom(
  registry: Registry,
  name: string,
  help: string,
  labelNames: string[],
  read: () => Array<[Record<string, string>, number]>,
  aggregator: 'sum' | 'max' = 'sum',
): void {
  new Gauge({
    name,
    help,
    labelNames,
    aggregator,
    registers: [registry],
    collect() {
      for (const [labels, value] of read()) this.labels(labels).set(value);
    },
  });
}
