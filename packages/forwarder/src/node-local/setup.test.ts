import { mkdir, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createSilentLogger, parseFlags } from '@cluster-dns/runtime';
import { toFqdn } from '@cluster-dns/wire';
import { loadAllYaml } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { createConfigReloader } from '../config/config-reloader.js';
import { readConfigSources } from '../config/config-source.js';
import { NO_BLOCK_PLUGINS } from '../server/block-plugins.js';
import { nodeCacheFlags } from './node-cache-options.js';
import { nodeCacheForwarder } from './setup.js';

const root = fileURLToPath(new URL('../../../..', import.meta.url));

/** The node-local ConfigMap's Corefile and a kube-dns ConfigMap folder, as the DaemonSet mounts them. */
async function mounts(kubeDns: Record<string, string>) {
  const dir = await mkdtemp(join(tmpdir(), 'node-cache-'));
  const docs = loadAllYaml(await readFile(`${root}/manifests/node-local/configmap.yaml`, 'utf8')) as Array<{
    data: { Corefile: string };
  }>;
  await writeFile(join(dir, 'Corefile.base'), (docs[0] as { data: { Corefile: string } }).data.Corefile);
  await mkdir(join(dir, 'kube-dns'));
  for (const [key, value] of Object.entries(kubeDns)) await writeFile(join(dir, 'kube-dns', key), value);
  await writeFile(join(dir, 'resolv.conf'), 'nameserver 192.0.2.53\n');
  return dir;
}

describe('node-local mode’s config at start', () => {
  it('runs on its Corefile alone when the kube-dns ConfigMap is invalid, and takes its stub domains once valid', async () => {
    const dir = await mounts({ stubDomains: '{"acme.local": ["10.1.1.1"' });
    const values = parseFlags(nodeCacheFlags, [
      '-localip=169.254.20.10,10.96.0.10',
      `-basecorefile=${join(dir, 'Corefile.base')}`,
      `-kubednscm=${join(dir, 'kube-dns')}`,
      `-resolv-file=${join(dir, 'resolv.conf')}`,
      '-conf=',
    ]).values;
    const errors: string[] = [];
    const log = { ...createSilentLogger(), error: (msg: string) => errors.push(msg) };
    const setup = await nodeCacheForwarder(values, {
      log,
      env: { KUBE_DNS_SERVICE_HOST: '10.96.0.11' },
      writeRendered: false,
    });
    expect(errors).toEqual([
      'invalid kube-dns ConfigMap at start: running on the Corefile alone until a valid one comes',
    ]);
    const reloader = createConfigReloader({
      noPlugins: NO_BLOCK_PLUGINS,
      read: () => readConfigSources(join(dir, 'kube-dns'), join(dir, 'resolv.conf'), setup.config.files),
      rules: [],
      log,
      routesFrom: setup.config.routesFrom,
      ...(setup.config.defaultsFrom ? { defaultsFrom: setup.config.defaultsFrom } : {}),
    });
    expect(await reloader.reload()).toBe('invalid');
    const routes = reloader.routes();
    expect(routes.routeFor(toFqdn('web.shop.svc.cluster.local')).servers).toEqual([{ host: '10.96.0.11', port: 53 }]);
    expect(routes.upstream.servers).toEqual([{ host: '192.0.2.53', port: 53 }]);
    expect(routes.routeFor(toFqdn('db.acme.local')).kind).toBe('upstream');

    await writeFile(join(dir, 'kube-dns', 'stubDomains'), JSON.stringify({ 'acme.local': ['10.1.1.1'] }));
    expect(await reloader.reload()).toBe('applied');
    expect(reloader.routes().routeFor(toFqdn('db.acme.local')).servers).toEqual([{ host: '10.1.1.1', port: 53 }]);
  });
});
