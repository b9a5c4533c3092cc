import { mkdir, mkdtemp, rename, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseKubeDnsConfig, readConfigDir } from './kube-dns-config.js';

/** A ConfigMap volume as the kubelet's AtomicWriter leaves it, steps of an update one by one. */
async function volume() {
  const root = await mkdtemp(join(tmpdir(), 'cm-'));
  let generation = 0;
  /** Writes a new version and swaps `..data` to it, but links no key: an update half done. */
  const swap = async (data: Record<string, string>) => {
    const dir = join(root, `..gen${++generation}`);
    await mkdir(dir);
    for (const [k, v] of Object.entries(data)) await writeFile(join(dir, k), v);
    await symlink(dir, join(root, '..data_tmp'));
    await rename(join(root, '..data_tmp'), join(root, '..data'));
  };
  const link = (key: string) => symlink(join('..data', key), join(root, key));
  return { root, swap, link };
}

describe('readConfigDir', () => {
  it('reads the version ..data points to, whole, even while the kubelet has not linked its keys yet', async () => {
    const v = await volume();
    await v.swap({ stubDomains: '{"acme.local":["10.0.0.1"]}' });
    await v.link('stubDomains');
    expect(await readConfigDir(v.root)).toEqual(new Map([['stubDomains', '{"acme.local":["10.0.0.1"]}']]));
    // The next version has only upstreamNameservers: swapped, not linked, the old link dangling.
    await v.swap({ upstreamNameservers: '["10.0.0.2"]' });
    expect(await readConfigDir(v.root)).toEqual(new Map([['upstreamNameservers', '["10.0.0.2"]']]));
  });

  it('reads plain files where there is no ..data (a folder written by hand), skipping hidden ones', async () => {
    const root = await mkdtemp(join(tmpdir(), 'cm-'));
    await writeFile(join(root, 'upstreamNameservers'), '["10.0.0.3"]');
    await writeFile(join(root, '.hidden'), 'x');
    await mkdir(join(root, 'sub'));
    expect(await readConfigDir(root)).toEqual(new Map([['upstreamNameservers', '["10.0.0.3"]']]));
  });

  it('is the default (empty) config for a folder that does not exist', async () => {
    expect(await readConfigDir(join(tmpdir(), 'no-such-config-dir'))).toEqual(new Map());
  });
});

describe('parseKubeDnsConfig: clientLimits (ours)', () => {
  it('takes known limits as whole numbers, and names what is wrong otherwise', () => {
    const parse = (text: string) => parseKubeDnsConfig(new Map([['clientLimits', text]])).clientLimits;
    expect(parse('{"qps": 500, "burst": 250, "rrlSlip": 0}')).toEqual({ qps: 500, burst: 250, rrlSlip: 0 });
    expect(parseKubeDnsConfig(new Map()).clientLimits).toEqual({});
    expect(() => parse('{"qpss": 5}')).toThrow(/clientLimits: unknown limit "qpss"/);
    expect(() => parse('{"burst": 0}')).toThrow(/burst: expected a whole number from 1/);
    expect(() => parse('{"qps": 1.5}')).toThrow(/qps: expected a whole number/);
    expect(() => parse('[500]')).toThrow(/clientLimits: expected a JSON object/);
    expect(() => parse('{"qps": 5')).toThrow(/clientLimits: not JSON/);
  });
});
