import { createSilentLogger, readCorefile } from '@cluster-dns/runtime';
import { toFqdn } from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import { planNodeLocal } from '../node-local/node-local-plan.js';
import { createConfigReloader } from './config-reloader.js';
import type { RawConfig } from './config-source.js';
import { parseServerFlag } from './server-flag.js';

function reloaderUnderTest() {
  let next: RawConfig | Error = { version: 'v0', data: new Map(), resolvConf: [] };
  const applied: string[] = [];
  const reloader = createConfigReloader({
    noPlugins: undefined,
    read: async () => {
      if (next instanceof Error) throw next;
      return next;
    },
    rules: [parseServerFlag('/cluster.local/127.0.0.1#10053')],
    log: createSilentLogger(),
    onApplied: (table) => {
      applied.push(
        table
          .routeFor(toFqdn('db.acme.local'))
          .servers.map((s) => `${s.host}:${s.port}`)
          .join(','),
      );
      return undefined;
    },
  });
  const serve = (version: string, data: Record<string, string>) => {
    next = { version, data: new Map(Object.entries(data)), resolvConf: [{ host: '192.0.2.53', port: 53 }] };
  };
  return { reloader, applied, serve, fail: (e: Error) => (next = e) };
}

const stubs = (server: string) => ({ stubDomains: JSON.stringify({ 'acme.local': [server] }) });

describe('the ConfigMap reloader, without files', () => {
  it('refuses a ConfigMap naming the forwarder itself, and skips itself in resolv.conf', async () => {
    const self = { host: '10.0.0.10', port: 53 };
    const isSelf = (s: { host: string; port: number }) => s.host === self.host && s.port === self.port;
    const warnings: string[] = [];
    let raw: RawConfig = {
      version: 'v1',
      data: new Map([['stubDomains', JSON.stringify({ 'acme.local': ['10.0.0.10'] })]]),
      resolvConf: [],
    };
    const reloader = createConfigReloader({
      noPlugins: undefined,
      read: async () => raw,
      rules: [],
      isSelf,
      log: { ...createSilentLogger(), warn: (msg) => warnings.push(msg) },
    });
    expect(await reloader.reload()).toBe('invalid');
    expect(reloader.failures).toBe(1);
    raw = { version: 'v2', data: new Map(), resolvConf: [self, { host: '192.0.2.53', port: 53 }] };
    expect(await reloader.reload()).toBe('applied');
    expect(reloader.routes().upstream.servers).toEqual([{ host: '192.0.2.53', port: 53 }]);
    expect(warnings).toEqual(['ignoring a resolv.conf nameserver that is this forwarder itself']);
  });

  it('applies a valid config at once, and does nothing when the content is unchanged', async () => {
    const r = reloaderUnderTest();
    r.serve('v1', stubs('10.1.1.1'));
    expect(await r.reloader.reload()).toBe('applied');
    expect(r.reloader.routes().routeFor(toFqdn('db.acme.local')).kind).toBe('stub');
    expect(await r.reloader.reload()).toBe('unchanged');
    expect(r.applied).toEqual(['10.1.1.1:53']);
  });

  it.each([
    ['bad JSON', { stubDomains: '{"acme.local": ["10.1.1.1"' }],
    ['4 upstreams', { upstreamNameservers: JSON.stringify(['10.0.0.1', '10.0.0.2', '10.0.0.3', '10.0.0.4']) }],
    ['a domain that is not DNS-1123', { stubDomains: JSON.stringify({ 'acme_local!': ['10.1.1.1'] }) }],
    ['a bad port', { stubDomains: JSON.stringify({ 'acme.local': ['10.1.1.1:99999'] }) }],
    ['a hostname for a server', { stubDomains: JSON.stringify({ 'acme.local': ['ns.acme.local'] }) }],
  ])('keeps the last good config on %s, and counts the failure once', async (_what, data) => {
    const r = reloaderUnderTest();
    r.serve('good', stubs('10.1.1.1'));
    await r.reloader.reload();
    r.serve('bad', data);
    expect(await r.reloader.reload()).toBe('invalid');
    expect(await r.reloader.reload()).toBe('unchanged');
    expect(r.reloader.failures).toBe(1);
    expect(r.reloader.routes().routeFor(toFqdn('db.acme.local')).servers).toEqual([{ host: '10.1.1.1', port: 53 }]);
  });

  it('runs on the defaults (--server rules, resolv.conf) when the first ConfigMap is invalid, and takes the next good one', async () => {
    const r = reloaderUnderTest();
    // The bracket left off, as in the ConfigMap that once left the forwarder with no upstream at all.
    r.serve('bad', { upstreamNameservers: '["1.2.3.4"', ...stubs('10.1.1.1') });
    expect(await r.reloader.reload()).toBe('invalid');
    expect(r.reloader.failures).toBe(1);
    expect(r.reloader.routes().upstream.servers).toEqual([{ host: '192.0.2.53', port: 53 }]);
    expect(r.reloader.routes().routeFor(toFqdn('db.acme.local')).kind).toBe('upstream');
    expect(r.reloader.routes().routeFor(toFqdn('web.svc.cluster.local')).servers).toEqual([
      { host: '127.0.0.1', port: 10053 },
    ]);
    r.serve('good', stubs('10.1.1.1'));
    expect(await r.reloader.reload()).toBe('applied');
    expect(r.reloader.routes().routeFor(toFqdn('db.acme.local')).servers).toEqual([{ host: '10.1.1.1', port: 53 }]);
    // Once a good one was seen, a bad one keeps it rather than going back to the defaults.
    r.serve('bad again', { upstreamNameservers: '["1.2.3.4"' });
    expect(await r.reloader.reload()).toBe('invalid');
    expect(r.reloader.routes().routeFor(toFqdn('db.acme.local')).kind).toBe('stub');
  });

  it('takes clientLimits from the ConfigMap over the flags’ while the key is there, and refuses a bad one', async () => {
    const r = reloaderUnderTest();
    const told: unknown[] = [];
    let version = 0;
    const reloader = createConfigReloader({
      noPlugins: undefined,
      read: async () => ({ version: `v${++version}`, data: new Map(data), resolvConf: [] }),
      rules: [],
      log: createSilentLogger(),
      onLimits: (limits) => told.push(limits),
    });
    let data: Array<[string, string]> = [['clientLimits', '{"qps": 500, "burst": 250}']];
    expect(await reloader.reload()).toBe('applied');
    expect(reloader.clientLimits()).toEqual({ qps: 500, burst: 250 });
    data = [['clientLimits', '{"qps": 500, "bursts": 250}']];
    expect(await reloader.reload()).toBe('invalid');
    expect(reloader.clientLimits()).toEqual({ qps: 500, burst: 250 });
    data = [['clientLimits', '{"qps": -1}']];
    expect(await reloader.reload()).toBe('invalid');
    data = [];
    expect(await reloader.reload()).toBe('applied');
    expect(told).toEqual([{ qps: 500, burst: 250 }, {}]);
    expect(r.reloader.clientLimits()).toEqual({});
  });

  it('keeps the last good config when the folder cannot be read', async () => {
    const r = reloaderUnderTest();
    r.serve('good', stubs('10.1.1.1'));
    await r.reloader.reload();
    r.fail(new Error('EACCES'));
    expect(await r.reloader.reload()).toBe('unreadable');
    expect(r.reloader.routes().routeFor(toFqdn('db.acme.local')).kind).toBe('stub');
  });

  it('lets the ConfigMap upstreams replace resolv.conf, as dnsmasq-nanny does', async () => {
    const r = reloaderUnderTest();
    r.serve('v1', { upstreamNameservers: JSON.stringify(['10.9.9.9:5353']) });
    await r.reloader.reload();
    expect(r.reloader.routes().upstream.servers).toEqual([{ host: '10.9.9.9', port: 5353 }]);
    r.serve('v2', {});
    await r.reloader.reload();
    expect(r.reloader.routes().upstream.servers).toEqual([{ host: '192.0.2.53', port: 53 }]);
  });
});

describe('the reloader with routes from a config file (node-local mode’s Corefile)', () => {
  it('applies the routes the file gives, keeps the last good ones on a bad file, and asks no block’s loop to itself', async () => {
    const self = { host: '169.254.20.10', port: 53 };
    let corefile = 'cluster.local { forward . 10.96.0.11 { force_tcp } }';
    let version = 0;
    const reloader = createConfigReloader({
      noPlugins: undefined,
      read: async () => ({
        version: `v${++version}`,
        data: new Map(),
        resolvConf: [],
        files: new Map([['Corefile', corefile]]),
      }),
      rules: [],
      isSelf: (s) => s.host === self.host && s.port === self.port,
      log: createSilentLogger(),
      routesFrom: (raw) => ({
        rules: planNodeLocal(readCorefile(raw.files?.get('Corefile') ?? '', { mode: 'node-local' })).rules,
        stubDomains: new Map(),
        upstreamNameservers: [],
        resolvConf: [],
      }),
    });
    expect(await reloader.reload()).toBe('applied');
    const route = reloader.routes().routeFor(toFqdn('web.shop.svc.cluster.local'));
    expect(route.servers).toEqual([{ host: '10.96.0.11', port: 53 }]);
    expect(route.forceTcp).toBe(true);
    corefile = 'cluster.local { forward . 10.96.0.11\n  kubernetes\n }';
    expect(await reloader.reload()).toBe('invalid');
    expect(reloader.routes().routeFor(toFqdn('web.shop.svc.cluster.local')).servers).toEqual([
      { host: '10.96.0.11', port: 53 },
    ]);
    // A block forwarding to ourselves: that server is not asked (SERVFAIL there), the rest runs.
    corefile = 'cluster.local { forward . 169.254.20.10 }\nexample.org { forward . 10.96.0.13 }';
    expect(await reloader.reload()).toBe('applied');
    expect(reloader.routes().routeFor(toFqdn('web.shop.svc.cluster.local'))).toMatchObject({ kind: 'unserved' });
    expect(reloader.routes().routeFor(toFqdn('www.example.org')).servers).toEqual([{ host: '10.96.0.13', port: 53 }]);
    expect(reloader.failures).toBe(1);
    corefile = 'cluster.local { forward . 10.96.0.12 }';
    expect(await reloader.reload()).toBe('applied');
    expect(reloader.routes().routeFor(toFqdn('web.shop.svc.cluster.local')).forceTcp).toBe(false);
  });
});
