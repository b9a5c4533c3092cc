import { fixtures, runChecked, waitFor } from '@cluster-dns/testkit';
import { QTYPE, queryDns, RCODE } from '@cluster-dns/wire';
import { afterEach, describe, expect, it } from 'vitest';
import { startStack } from './support/stack.js';

// clusterset.local (KEP-1645) through the whole stack: the record-builder lists ServiceImports and
// imported EndpointSlices from testkit's API server over HTTP (client-node), the Pod's forwarder
// routes the zone to it and is pushed its changes (NOTIFY, then IXFR), and dig asks the forwarder.

const CS = 'svc.clusterset.local';
const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const imports = () => [
  fixtures.service('default', 'kubernetes', { clusterIPs: ['10.96.0.1'], ports: [{ name: 'https', port: 443 }] }),
  fixtures.serviceImport('shop', 'cart', { ips: ['10.112.0.5'], ports: [{ name: 'http', port: 80 }] }),
  fixtures.serviceImport('data', 'pg', { type: 'Headless', ports: [{ name: 'pg', port: 5432 }] }),
  fixtures.importedEndpointSlice('data', 'pg', 'pg-a', 'cluster-a', [{ addresses: ['10.1.0.10'], hostname: 'pg-0' }], {
    ports: [{ name: 'pg', port: 5432 }],
  }),
  fixtures.importedEndpointSlice('data', 'pg', 'pg-b', 'cluster-b', [{ addresses: ['10.2.0.10'], hostname: 'pg-0' }], {
    ports: [{ name: 'pg', port: 5432 }],
  }),
];

const dig = async (port: number, name: string, type = 'A', ...flags: string[]) =>
  (await runChecked('dig', ['+short', '+time=2', '+tries=1', ...flags, '-p', String(port), '@127.0.0.1', name, type]))
    .trim()
    .split('\n')
    .filter(Boolean)
    .sort();

describe('clusterset.local through the stack', () => {
  it('answers ServiceImports as KEP-1645 says, over UDP and TCP, and pushes their changes through the warm cache', async () => {
    const stack = await startStack({ objects: imports(), clustersetZone: 'clusterset.local' });
    cleanups.push(() => stack.close());
    const port = stack.fwPort;
    const ask = (name: string, type: number = QTYPE.A) =>
      queryDns({ host: '127.0.0.1', port }, name, type, { timeoutMs: 5000 });

    expect(await dig(port, `cart.shop.${CS}`)).toEqual(['10.112.0.5']);
    expect(await dig(port, `_http._tcp.cart.shop.${CS}`, 'SRV')).toEqual([`10 100 80 cart.shop.${CS}.`]);
    expect(await dig(port, `pg.data.${CS}`)).toEqual(['10.1.0.10', '10.2.0.10']);
    expect(await dig(port, `pg-0.cluster-b.pg.data.${CS}`)).toEqual(['10.2.0.10']);
    expect(await dig(port, `_pg._tcp.pg.data.${CS}`, 'SRV')).toEqual([
      `10 50 5432 pg-0.cluster-a.pg.data.${CS}.`,
      `10 50 5432 pg-0.cluster-b.pg.data.${CS}.`,
    ]);
    expect(await dig(port, 'dns-version.clusterset.local', 'TXT')).toEqual(['"1.0.0"']);
    expect(await dig(port, '5.0.112.10.in-addr.arpa', 'PTR')).toEqual([`cart.shop.${CS}.`]);
    expect(await dig(port, `pg-0.cluster-a.pg.data.${CS}`, 'A', '+tcp')).toEqual(['10.1.0.10']);
    // A ClusterSetIP import names no single cluster (§2.3.4).
    expect((await ask(`cluster-a.cart.shop.${CS}`)).flags.rcode).toBe(RCODE.NXDOMAIN);

    // Changes come by push: the warm answers change at once, not after the TTL.
    await waitFor(
      async () =>
        /^clusterdns_forwarder_zone_serial\{zone="clusterset\.local\."\} [1-9]/m.test(
          await (await fetch(`http://127.0.0.1:${stack.fw.ready.metricsPort}/metrics`)).text(),
        ),
      { timeoutMs: 10_000, what: 'the forwarder to hold the clusterset zone by push' },
    );
    stack.api.apply(
      fixtures.importedEndpointSlice(
        'data',
        'pg',
        'pg-c',
        'cluster-c',
        [{ addresses: ['10.3.0.10'], hostname: 'pg-0' }],
        {
          ports: [{ name: 'pg', port: 5432 }],
        },
      ),
    );
    await waitFor(async () => (await ask(`pg.data.${CS}`)).answers.length === 3, {
      timeoutMs: 5000,
      what: 'the new cluster’s endpoint at the base name',
    });
    expect((await ask(`pg-0.cluster-c.pg.data.${CS}`)).answers.map((a) => a.address)).toEqual(['10.3.0.10']);
    stack.api.remove('ServiceImport', 'shop', 'cart');
    await waitFor(async () => (await ask(`cart.shop.${CS}`)).flags.rcode === RCODE.NXDOMAIN, {
      timeoutMs: 5000,
      what: 'the import’s name gone',
    });
    // The cluster zone is untouched by all this.
    expect(await dig(port, 'kubernetes.default.svc.cluster.local')).toEqual(['10.96.0.1']);
  });
});
