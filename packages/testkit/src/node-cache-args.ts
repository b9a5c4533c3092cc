import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './free-port.js';

/**
 * node-cache-main.js's flags for a test or a bench run, on loopback without a link or rules, from
 * this Corefile: it and a resolv.conf are written to a folder of their own (also the kube-dns
 * ConfigMap folder, empty), and its setup metrics go to a free port. `extra` flags follow.
 * `localIp`: the address it serves on instead of 127.0.0.1, which the caller has put on an
 * interface (a node's network namespace); its setup metrics then listen there on 9353.
 * `notifyListen`: where it takes NOTIFY (off by default).
 */
export async function loopbackNodeCacheArgs(
  corefile: string,
  extra: readonly string[] = [],
  options: { localIp?: string; notifyListen?: string } = {},
): Promise<string[]> {
  const dir = mkdtempSync(join(tmpdir(), 'node-cache-'));
  writeFileSync(join(dir, 'Corefile.base'), corefile);
  writeFileSync(join(dir, 'resolv.conf'), 'nameserver 127.0.0.1\n');
  return [
    `-localip=${options.localIp ?? '127.0.0.1'}`,
    '-setupinterface=false',
    '-setupiptables=false',
    '-conf=',
    `-basecorefile=${join(dir, 'Corefile.base')}`,
    `-kubednscm=${dir}`,
    `-resolv-file=${join(dir, 'resolv.conf')}`,
    `-metrics-listen-address=${options.localIp ? `${options.localIp}:9353` : `127.0.0.1:${await freePort()}`}`,
    `-notify-listen-address=${options.notifyListen ?? ''}`,
    ...extra,
  ];
}
