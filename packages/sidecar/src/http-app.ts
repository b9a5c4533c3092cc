import express, { type Express } from 'express';
import type { Registry } from 'prom-client';
import type { RunningProbe } from './dns-probe.js';

const toKubeDnsJson = (p: RunningProbe) => ({
  IsOk: p.status.isOk,
  LatencySeconds: p.status.latencySeconds,
  Err: p.status.err,
});

/**
 * kube-dns's sidecar endpoints, same JSON shapes: /healthcheck/<label> (200 or 503), /healthz
 * (200 while running; `?verbose` lists probes and is 503 if any fails), /readyz (the aggregate),
 * and the metrics path.
 */
export function createHttpApp(options: {
  probes: readonly RunningProbe[];
  registry: Registry;
  metricsPath: string;
  now?: () => Date;
}): Express {
  const app = express();
  app.disable('x-powered-by');
  const byLabel = new Map(options.probes.map((p) => [p.spec.label, p]));
  const now = options.now ?? (() => new Date());

  const aggregate = () => {
    const probes = Object.fromEntries(options.probes.map((p) => [p.spec.label, toKubeDnsJson(p)]));
    const ok = options.probes.every((p) => p.status.isOk);
    return { ok, body: { IsOk: ok, Probes: probes } };
  };

  app.get('/healthcheck/:label', (req, res) => {
    const probe = byLabel.get(req.params.label);
    if (!probe) {
      res.status(404).type('text/plain').send(`no probe named ${req.params.label}\n`);
      return;
    }
    res.status(probe.status.isOk ? 200 : 503).json(toKubeDnsJson(probe));
  });
  app.get('/healthz', (req, res) => {
    if (req.query.verbose === undefined) {
      res.status(200).type('text/plain').send(`ok (${now().toString()})\n`);
      return;
    }
    const { ok, body } = aggregate();
    res.status(ok ? 200 : 503).json(body);
  });
  app.get('/readyz', (_req, res) => {
    const { ok, body } = aggregate();
    res.status(ok ? 200 : 503).json(body);
  });
  app.get(options.metricsPath, async (_req, res) => {
    res.type(options.registry.contentType).send(await options.registry.metrics());
  });
  return app;
}
