import { mkdir, mkdtemp, rename, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, waitFor } from '@cluster-dns/testkit';
import { QTYPE } from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import { startForwarder, upstream } from './harness.js';

/** Writes config the way the kubelet updates a ConfigMap volume: a new ..data dir, swapped by symlink. */
async function kubeletConfigDir() {
  const root = await mkdtemp(join(tmpdir(), 'fw-cm-'));
  let generation = 0;
  const write = async (data: Record<string, string>) => {
    generation++;
    const dir = join(root, `..gen${generation}`);
    await mkdir(dir);
    for (const [k, v] of Object.entries(data)) await writeFile(join(dir, k), v);
    await symlink(dir, join(root, '..data_tmp'));
    await rename(join(root, '..data_tmp'), join(root, '..data'));
    for (const k of Object.keys(data)) {
      await symlink(join('..data', k), join(root, `${k}.tmp`)).catch(() => undefined);
      await rename(join(root, `${k}.tmp`), join(root, k)).catch(() => undefined);
    }
  };
  return { root, write };
}

describe('ConfigMap reload', () => {
  it('applies a new valid config without restart, keeps the cache of unchanged routes, and keeps the last good config on a bad update', async () => {
    const first = await upstream({ records: { 'db.acme.local.': [{ type: QTYPE.A, address: '10.1.1.1' }] } });
    const second = await upstream({ records: { 'db.acme.local.': [{ type: QTYPE.A, address: '10.2.2.2' }] } });
    const outside = await upstream({ records: { 'example.org.': [{ type: QTYPE.A, address: '192.0.2.1' }] } });
    const cm = await kubeletConfigDir();
    await cm.write({ stubDomains: JSON.stringify({ 'acme.local': [`127.0.0.1:${first.port}`] }) });
    const f = await startForwarder([
      `--config-dir=${cm.root}`,
      '--config-poll-interval=100ms',
      `--server=${outside.address}`,
      '--cache-size=100',
    ]);
    expect(await f.resolver.resolve4('db.acme.local')).toEqual(['10.1.1.1']);
    expect(await f.resolver.resolve4('example.org')).toEqual(['192.0.2.1']);

    await cm.write({ stubDomains: JSON.stringify({ 'acme.local': [`127.0.0.1:${second.port}`] }) });
    await waitFor(() => f.logs.filter((l) => l.msg === 'config applied').length === 2, { what: 'the new config' });
    expect(await f.resolver.resolve4('db.acme.local')).toEqual(['10.2.2.2']);
    expect(await f.resolver.resolve4('example.org')).toEqual(['192.0.2.1']);
    expect(outside.queries).toHaveLength(1);
    expect(f.logs.find((l) => l.msg === 'config applied' && l.cacheEntriesDropped === 1)).toBeDefined();

    await cm.write({ stubDomains: '{"acme.local": ["not-an-ip"' });
    await waitFor(() => f.logs.some((l) => l.msg === 'invalid config; keeping the last good one'), {
      what: 'the rejection',
    });
    expect(await f.resolver.resolve4('db.acme.local')).toEqual(['10.2.2.2']);

    await cm.write({
      upstreamNameservers: JSON.stringify(['127.0.0.1:1', '127.0.0.1:2', '127.0.0.1:3', '127.0.0.1:4']),
    });
    await waitFor(() => f.logs.filter((l) => l.msg === 'invalid config; keeping the last good one').length === 2, {
      what: 'the second rejection',
    });
    const rejection = f.logs.filter((l) => l.msg === 'invalid config; keeping the last good one')[1] as { err: Error };
    expect(String(rejection.err.message)).toContain('at most 3');
  });

  it('refuses every kind of bad update with the last good config kept and coredns_reload_failed_total counting', async () => {
    const good = await upstream({ records: { 'db.acme.local.': [{ type: QTYPE.A, address: '10.1.1.1' }] } });
    const cm = await kubeletConfigDir();
    await cm.write({ stubDomains: JSON.stringify({ 'acme.local': [`127.0.0.1:${good.port}`] }) });
    const port = await freePort();
    const f = await startForwarder([`--config-dir=${cm.root}`, '--config-poll-interval=100ms', `--port=${port}`]);
    expect(await f.resolver.resolve4('db.acme.local')).toEqual(['10.1.1.1']);
    const bad: Array<[Record<string, string>, string]> = [
      [{ stubDomains: '{"acme.local": [' }, 'stubDomains'],
      [{ upstreamNameservers: JSON.stringify(['1.1.1.1', '1.0.0.1', '8.8.8.8', '8.8.4.4']) }, 'at most 3'],
      [{ stubDomains: JSON.stringify({ 'bad..domain': ['1.1.1.1'] }) }, 'bad..domain'],
      [{ stubDomains: JSON.stringify({ 'acme.local': ['1.1.1.1:99999'] }) }, '99999'],
      [{ upstreamNameservers: JSON.stringify([`127.0.0.1:${port}`]) }, 'itself'],
    ];
    for (const [i, [data, named]] of bad.entries()) {
      await cm.write(data);
      const rejections = () => f.logs.filter((l) => l.msg === 'invalid config; keeping the last good one');
      await waitFor(() => rejections().length === i + 1, { what: `the rejection of ${JSON.stringify(data)}` });
      expect(String((rejections()[i] as { err: Error }).err.message)).toContain(named);
      expect(await f.resolver.resolve4('db.acme.local')).toEqual(['10.1.1.1']);
    }
    const metrics = await (await fetch(`http://127.0.0.1:${f.metricsPort}/metrics`)).text();
    expect(metrics).toMatch(new RegExp(`^coredns_reload_failed_total ${bad.length}$`, 'm'));
    expect(good.queries).toHaveLength(1);
  });

  it('starts on the defaults when the ConfigMap is invalid at start, says so, and takes the next good version', async () => {
    const stub = await upstream({ records: { 'db.acme.local.': [{ type: QTYPE.A, address: '10.1.1.1' }] } });
    const dir = await mkdtemp(join(tmpdir(), 'fw-resolv-'));
    const resolvFile = join(dir, 'resolv.conf');
    await writeFile(resolvFile, 'nameserver 127.0.0.9\n');
    const cm = await kubeletConfigDir();
    await cm.write({ upstreamNameservers: '["1.2.3.4"' });
    const f = await startForwarder([
      `--config-dir=${cm.root}`,
      `--resolv-file=${resolvFile}`,
      '--config-poll-interval=100ms',
    ]);
    const started = f.logs.find((l) => l.msg === 'ready') as { routes: Record<string, string[]> };
    // resolv.conf has no ports and tests cannot bind port 53: the routes are read from the logs.
    expect(started.routes['.']).toEqual(['127.0.0.9#53']);
    const fallback = f.logs.find((l) => String(l.msg).startsWith('invalid config and no good one before it'));
    expect(fallback).toMatchObject({ level: 'error', routes: { '.': ['127.0.0.9#53'] } });
    expect(String((fallback as { err: Error }).err.message)).toContain('upstreamNameservers');
    const metrics = await (await fetch(`http://127.0.0.1:${f.metricsPort}/metrics`)).text();
    expect(metrics).toMatch(/^coredns_reload_failed_total 1$/m);

    await cm.write({ stubDomains: JSON.stringify({ 'acme.local': [`127.0.0.1:${stub.port}`] }) });
    await waitFor(() => f.logs.some((l) => l.msg === 'config applied'), { what: 'the good version' });
    expect(await f.resolver.resolve4('db.acme.local')).toEqual(['10.1.1.1']);
  });

  it('lowers and restores a client’s rate from the ConfigMap’s clientLimits, without a restart', async () => {
    const up = await upstream({ records: { 'a.example.org.': [{ type: QTYPE.A, address: '192.0.2.1' }] } });
    const cm = await kubeletConfigDir();
    await cm.write({ clientLimits: JSON.stringify({ qps: 1, burst: 3, slip: 0 }) });
    const f = await startForwarder([
      `--config-dir=${cm.root}`,
      '--config-poll-interval=100ms',
      `--server=${up.address}`,
    ]);
    const six = async () => {
      const rcodes: number[] = [];
      for (let i = 0; i < 6; i++)
        rcodes.push((await f.query('a.example.org', QTYPE.A, { localAddress: '127.0.0.5' })).flags.rcode);
      return rcodes;
    };
    // Three saved up, then one a second: the test asks faster than that.
    const limited = await six();
    expect(limited.slice(0, 3)).toEqual([0, 0, 0]);
    expect(limited.filter((r) => r === 5).length).toBeGreaterThanOrEqual(2);
    expect(f.logs.find((l) => l.msg === 'config applied')).toMatchObject({ clientLimits: { qps: 1, burst: 3 } });
    await cm.write({});
    await waitFor(() => f.logs.filter((l) => l.msg === 'config applied').length === 2, { what: 'the limits lifted' });
    expect(await six()).toEqual([0, 0, 0, 0, 0, 0]);
  });

  it('refuses to start with a --server that is the forwarder itself, (the ConfigMap and resolv.conf cases are unit-tested)', async () => {
    const port = await freePort();
    await expect(startForwarder([`--port=${port}`, `--server=127.0.0.1#${port}`])).rejects.toThrow(
      /--server.*other than this forwarder itself/,
    );
  });

  it('re-reads --resolv-file when it changes', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'fw-resolv-'));
    const file = join(dir, 'resolv.conf');
    // resolv.conf has no ports and tests cannot bind port 53, so the new nameservers are checked
    // in the route table the forwarder logs, not by sending them queries.
    await writeFile(file, 'nameserver 127.0.0.1\n');
    const f = await startForwarder([`--resolv-file=${file}`, '--config-poll-interval=100ms']);
    f.logs.length = 0;
    await writeFile(file, 'search example.org\nnameserver 127.0.0.9\nnameserver ::1\n');
    await waitFor(() => f.logs.some((l) => l.msg === 'config applied'), { what: 'the resolv.conf change' });
    const applied = f.logs.find((l) => l.msg === 'config applied') as { routes: Record<string, string[]> };
    expect(applied.routes['.']).toEqual(['127.0.0.9#53', '[::1]#53']);
  });
});
